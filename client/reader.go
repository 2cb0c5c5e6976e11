package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/storeconn"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Errors of the readers.
var (
	// ErrBelowRetention: the reader's position was deleted by retention;
	// apierr.Detail(err).OldestLsn is the oldest LSN still kept.
	ErrBelowRetention = errors.New("client: position below retention")
	// ErrContinuity: a node sent a stream that skips or repeats an LSN or
	// offset. The reader refuses it (a server bug); its position is
	// unchanged, so the next call reads on from there.
	ErrContinuity = errors.New("client: read stream broke continuity")
	// ErrUnknownTopic: a TopicReader's topic was never written (the
	// leader, or every node, said so; apierr.Detail(err).Topic names it).
	// Set TopicReaderConfig.WaitForTopic to wait for it instead.
	ErrUnknownTopic = errors.New("client: unknown topic")
)

// continuityErr turns a *storeconn.ContinuityError from node's stream into
// ErrContinuity; other errors pass unchanged.
func (c *Client) continuityErr(err error, node int) error {
	var ce *storeconn.ContinuityError
	if !errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%w: node %s: %w", ErrContinuity, c.addrOf(node), err)
}

// addrOf returns node's address.
func (c *Client) addrOf(node int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.addrs[node]
}

// belowRetention wraps a below-retention refusal in ErrBelowRetention.
func belowRetention(err error) error {
	if _, ok := apierr.BelowRetention(err); ok {
		return fmt.Errorf("%w: %w", ErrBelowRetention, err)
	}
	return err
}

// ReaderConfig says what a Reader reads.
type ReaderConfig struct {
	// FromLSN is the first LSN to read (0 means 1).
	FromLSN types.LSN
	// ToLSN is the last LSN to read; 0 follows the log forever.
	ToLSN types.LSN
	// Topics keeps only these topics' slices (and offset commits);
	// transactions with none of them are skipped. Empty: everything.
	Topics []string
}

// Reader follows the log in LSN order from any node. After a node fails
// it resumes on another from the LSN after the last transaction it
// returned: no gap, no duplicate. It checks the continuity of what nodes
// send (ErrContinuity). Not safe for concurrent use; Close it when done.
type Reader struct {
	c       *Client
	r       *storeconn.LogReader // reads from the LSN after buf
	cfg     ReaderConfig
	next    types.LSN // the next LSN not yet returned or skipped
	buf     []*Transaction
	through types.LSN // read_through_lsn of the batch in buf
}

// NewReader returns a Reader; it connects on the first Next.
func (c *Client) NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.FromLSN == 0 {
		cfg.FromLSN = 1
	}
	if cfg.ToLSN != 0 && cfg.ToLSN < cfg.FromLSN {
		return nil, fmt.Errorf("client: reader ToLSN %d below FromLSN %d", cfg.ToLSN, cfg.FromLSN)
	}
	req := &logstorepb.ReadRequest{FromLsn: uint64(cfg.FromLSN), ToLsn: uint64(cfg.ToLSN), Topics: cfg.Topics}
	return &Reader{c: c, r: storeconn.NewLogReader(c.sc, readPolicy, req, nil), cfg: cfg, next: cfg.FromLSN}, nil
}

// Position returns the LSN the reader will read next: resume a new Reader
// from it to continue where this one stopped.
func (r *Reader) Position() types.LSN { return r.next }

// Next returns the next transaction. It waits at the head of the log for
// new ones; it returns io.EOF after ToLSN, ErrBelowRetention when its
// position was deleted, or ctx's error (the position is then unchanged:
// calling Next again continues).
func (r *Reader) Next(ctx context.Context) (*Transaction, error) {
	for len(r.buf) == 0 {
		resp, err := r.r.Next(ctx)
		if err != nil {
			return nil, belowRetention(r.c.continuityErr(err, r.r.Node()))
		}
		r.buf, r.through = resp.Transactions, types.LSN(resp.ReadThroughLsn)
		if len(r.buf) == 0 {
			r.next = r.through + 1
		}
	}
	txn := r.buf[0]
	r.buf = r.buf[1:]
	r.next = types.LSN(txn.Lsn) + 1
	if len(r.buf) == 0 {
		r.next = r.through + 1
	}
	return txn, nil
}

// Close ends the reader's stream.
func (r *Reader) Close() { r.r.Close() }

// TopicWaitInterval is how often a TopicReader with WaitForTopic asks
// again for a topic that does not exist yet.
const TopicWaitInterval = 500 * time.Millisecond

// TopicReaderConfig says what a TopicReader reads.
type TopicReaderConfig struct {
	Topic string
	// FromOffset is the first offset to read.
	FromOffset types.Offset
	// Limit stops the reader (io.EOF) after that many messages; 0 follows
	// the topic forever.
	Limit uint64
	// WaitForTopic makes Next wait for a topic that was never written
	// (asking again every TopicWaitInterval) instead of returning
	// ErrUnknownTopic: for a reader started before the topic's first
	// writer. Off, a misspelt topic fails at once.
	WaitForTopic bool
}

// TopicReader follows one topic by offset from any node, and resumes after
// a node failure from the offset after the last message it returned: no
// gap, no duplicate (offsets are checked to be dense). Not safe for
// concurrent use; Close it when done.
type TopicReader struct {
	c    *Client
	s    *storeconn.Stream[*logstorepb.ReadTopicResponse]
	cfg  TopicReaderConfig
	next types.Offset // the next offset not yet returned
	read uint64       // messages returned
	buf  []*TopicMessage
}

// NewTopicReader returns a TopicReader; it connects on the first Next.
func (c *Client) NewTopicReader(cfg TopicReaderConfig) (*TopicReader, error) {
	if cfg.Topic == "" {
		return nil, errors.New("client: topic reader needs a topic")
	}
	r := &TopicReader{c: c, cfg: cfg, next: cfg.FromOffset}
	r.s = storeconn.NewStream(c.sc, readPolicy, func(ctx context.Context, _ int, ls logstorepb.LogStoreClient) (func() (*logstorepb.ReadTopicResponse, error), error) {
		req := &logstorepb.ReadTopicRequest{Topic: r.cfg.Topic, FromOffset: uint64(r.next), Follow: true}
		if r.cfg.Limit != 0 {
			req.MaxMessages = r.cfg.Limit - r.read
		}
		return storeconn.Recv(ls.ReadTopic(ctx, req))
	})
	return r, nil
}

// Position returns the offset the reader will read next.
func (r *TopicReader) Position() types.Offset { return r.next }

// Next returns the topic's next message, waiting for it when the reader is
// at the end. It returns io.EOF after Limit messages, ErrBelowRetention
// when its position was deleted, or ctx's error (the position is then
// unchanged).
func (r *TopicReader) Next(ctx context.Context) (*TopicMessage, error) {
	for len(r.buf) == 0 {
		if r.cfg.Limit != 0 && r.read >= r.cfg.Limit {
			r.s.Close()
			return nil, io.EOF
		}
		resp, err := r.s.Next(ctx)
		if errors.Is(err, io.EOF) {
			continue // a stream that ended before Limit: reopen from the position
		}
		if err != nil {
			if apierr.CodeOf(err) != logstorepb.ErrorCode_UNKNOWN_TOPIC {
				return nil, belowRetention(err)
			}
			if !r.cfg.WaitForTopic {
				return nil, fmt.Errorf("%w: %w", ErrUnknownTopic, err)
			}
			if err := storeconn.Sleep(ctx, TopicWaitInterval); err != nil {
				return nil, err
			}
			continue
		}
		want := r.next
		for _, m := range resp.Messages {
			if types.Offset(m.Offset) != want {
				r.s.Close()
				return nil, fmt.Errorf("%w: node %s sent topic %q offset %d, next is %d", ErrContinuity, r.c.addrOf(r.s.Node()), r.cfg.Topic, m.Offset, want)
			}
			want++
		}
		r.buf = resp.Messages
		if r.cfg.Limit != 0 && uint64(len(r.buf)) > r.cfg.Limit-r.read {
			r.buf = r.buf[:r.cfg.Limit-r.read]
		}
	}
	m := r.buf[0]
	r.buf = r.buf[1:]
	r.next, r.read = types.Offset(m.Offset)+1, r.read+1
	return m, nil
}

// Close ends the reader's stream.
func (r *TopicReader) Close() { r.s.Close() }
