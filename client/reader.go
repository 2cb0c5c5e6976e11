package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
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
)

// follower is the stream plumbing shared by Reader and TopicReader: one
// server stream at a time, from any node (round robin over the known
// addresses), reopened after a failure with backoff. It runs on the
// caller's goroutine; the stream's context is cancelled when the caller's
// ctx ends during a receive (context.AfterFunc), and by close.
type follower[R any] struct {
	c      *Client
	b      backoff.BackOff
	addr   string
	recv   func() (R, error) // the open stream's Recv; nil when none
	cancel context.CancelFunc
}

func newFollower[R any](c *Client) follower[R] {
	return follower[R]{c: c, b: c.newBackoff(context.Background())}
}

// opener opens a stream on cc from the reader's current position.
type opener[R any] func(ctx context.Context, cc *grpc.ClientConn) (func() (R, error), error)

// next returns the next response of the stream, opening one with open when
// there is none. It returns io.EOF when a stream ended cleanly (the caller
// knows whether it is done, and calls pause and next again if not), a
// permanent error, or ctx's error. Transient failures (node down, not
// reachable, shutting down) move to another node after a backoff.
func (f *follower[R]) next(ctx context.Context, open opener[R]) (R, error) {
	var zero R
	for {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		if f.recv == nil {
			if err := f.connect(ctx, open); err != nil {
				if err := f.failed(ctx, err); err != nil {
					return zero, err
				}
				continue
			}
		}
		stop := context.AfterFunc(ctx, f.cancel)
		resp, err := f.recv()
		stop()
		if err == nil {
			f.b.Reset()
			return resp, nil
		}
		f.close()
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		if errors.Is(err, io.EOF) {
			return zero, io.EOF
		}
		if err := f.failed(ctx, err); err != nil {
			return zero, err
		}
	}
}

func (f *follower[R]) connect(ctx context.Context, open opener[R]) error {
	addr := f.c.pick(false)
	f.addr = addr
	cc, err := f.c.conn(addr)
	if err != nil {
		return err
	}
	if !f.c.ready(ctx, cc) {
		return fmt.Errorf("%w: %s", errUnreachable, addr)
	}
	sctx, cancel := context.WithCancel(context.Background())
	recv, err := open(sctx, cc)
	if err != nil {
		cancel()
		return err
	}
	f.recv, f.cancel = recv, cancel
	return nil
}

// failed returns err when it is permanent; for a transient error it marks
// the node failed and waits a backoff (nil), or returns ctx's error.
func (f *follower[R]) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if apierr.CodeOf(err) == logstorepb.ErrorCode_BELOW_RETENTION {
		return fmt.Errorf("%w: %w", ErrBelowRetention, err)
	}
	if _, transient := retryable(err); !transient && !errors.Is(err, errUnreachable) {
		return err
	}
	f.c.failed(f.addr)
	f.c.cfg.Logger.Debug("read stream failed; resuming on another node", "addr", f.addr, "err", err)
	return f.pause(ctx)
}

// pause waits one backoff interval, or until ctx ends.
func (f *follower[R]) pause(ctx context.Context) error {
	t := time.NewTimer(f.b.NextBackOff())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close ends the open stream, if any.
func (f *follower[R]) close() {
	if f.cancel != nil {
		f.cancel()
	}
	f.recv, f.cancel = nil, nil
}

// ReaderConfig says what a Reader reads.
type ReaderConfig struct {
	// FromLSN is the first LSN to read (0 means 1).
	FromLSN uint64
	// ToLSN is the last LSN to read; 0 follows the log forever.
	ToLSN uint64
	// Topics keeps only these topics' slices (and offset commits);
	// transactions with none of them are skipped. Empty: everything.
	Topics []string
}

// Reader follows the log in LSN order from any node. After a node fails
// it resumes on another from the LSN after the last transaction it
// returned: no gap, no duplicate. It checks the continuity of what nodes
// send (ErrContinuity). Not safe for concurrent use; Close it when done.
type Reader struct {
	f       follower[*logstorepb.ReadResponse]
	cfg     ReaderConfig
	next    uint64 // the next LSN not yet returned or skipped
	buf     []*Transaction
	through uint64 // read_through_lsn of the batch in buf
}

// NewReader returns a Reader; it connects on the first Next.
func (c *Client) NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.FromLSN == 0 {
		cfg.FromLSN = 1
	}
	if cfg.ToLSN != 0 && cfg.ToLSN < cfg.FromLSN {
		return nil, fmt.Errorf("client: reader ToLSN %d below FromLSN %d", cfg.ToLSN, cfg.FromLSN)
	}
	return &Reader{f: newFollower[*logstorepb.ReadResponse](c), cfg: cfg, next: cfg.FromLSN}, nil
}

// Position returns the LSN the reader will read next: resume a new Reader
// from it to continue where this one stopped.
func (r *Reader) Position() uint64 { return r.next }

// Next returns the next transaction. It waits at the head of the log for
// new ones; it returns io.EOF after ToLSN, ErrBelowRetention when its
// position was deleted, or ctx's error (the position is then unchanged:
// calling Next again continues).
func (r *Reader) Next(ctx context.Context) (*Transaction, error) {
	for len(r.buf) == 0 {
		if r.cfg.ToLSN != 0 && r.next > r.cfg.ToLSN {
			r.f.close()
			return nil, io.EOF
		}
		resp, err := r.f.next(ctx, func(ctx context.Context, cc *grpc.ClientConn) (func() (*logstorepb.ReadResponse, error), error) {
			s, err := logstorepb.NewLogStoreClient(cc).Read(ctx, &logstorepb.ReadRequest{FromLsn: r.next, ToLsn: r.cfg.ToLSN, Topics: r.cfg.Topics})
			if err != nil {
				return nil, err
			}
			return s.Recv, nil
		})
		if errors.Is(err, io.EOF) { // a stream that ended before ToLSN
			if err := r.f.pause(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := r.accept(resp); err != nil {
			r.f.close()
			return nil, err
		}
	}
	txn := r.buf[0]
	r.buf = r.buf[1:]
	r.next = txn.Lsn + 1
	if len(r.buf) == 0 {
		r.next = r.through + 1
	}
	return txn, nil
}

// accept checks a response against the position and buffers it.
func (r *Reader) accept(resp *logstorepb.ReadResponse) error {
	want := r.next
	for _, txn := range resp.Transactions {
		if txn.Lsn < want || (len(r.cfg.Topics) == 0 && txn.Lsn != want) {
			return fmt.Errorf("%w: node %s sent lsn %d, next is %d", ErrContinuity, r.f.addr, txn.Lsn, want)
		}
		want = txn.Lsn + 1
	}
	if resp.ReadThroughLsn+1 < want || resp.ReadThroughLsn < r.next ||
		(r.cfg.ToLSN != 0 && resp.ReadThroughLsn > r.cfg.ToLSN) {
		return fmt.Errorf("%w: node %s read through lsn %d (position %d, last sent %d, to %d)",
			ErrContinuity, r.f.addr, resp.ReadThroughLsn, r.next, want-1, r.cfg.ToLSN)
	}
	r.buf, r.through = resp.Transactions, resp.ReadThroughLsn
	if len(r.buf) == 0 {
		r.next = r.through + 1
	}
	return nil
}

// Close ends the reader's stream.
func (r *Reader) Close() { r.f.close() }

// TopicReaderConfig says what a TopicReader reads.
type TopicReaderConfig struct {
	Topic string
	// FromOffset is the first offset to read.
	FromOffset uint64
	// Limit stops the reader (io.EOF) after that many messages; 0 follows
	// the topic forever.
	Limit uint64
}

// TopicReader follows one topic by offset from any node, and resumes after
// a node failure from the offset after the last message it returned: no
// gap, no duplicate (offsets are checked to be dense). Not safe for
// concurrent use; Close it when done.
type TopicReader struct {
	f    follower[*logstorepb.ReadTopicResponse]
	cfg  TopicReaderConfig
	next uint64 // the next offset not yet returned
	read uint64 // messages returned
	buf  []*TopicMessage
}

// NewTopicReader returns a TopicReader; it connects on the first Next.
func (c *Client) NewTopicReader(cfg TopicReaderConfig) (*TopicReader, error) {
	if cfg.Topic == "" {
		return nil, errors.New("client: topic reader needs a topic")
	}
	return &TopicReader{f: newFollower[*logstorepb.ReadTopicResponse](c), cfg: cfg, next: cfg.FromOffset}, nil
}

// Position returns the offset the reader will read next.
func (r *TopicReader) Position() uint64 { return r.next }

// Next returns the topic's next message, waiting for it when the reader is
// at the end. It returns io.EOF after Limit messages, ErrBelowRetention
// when its position was deleted, or ctx's error (the position is then
// unchanged).
func (r *TopicReader) Next(ctx context.Context) (*TopicMessage, error) {
	for len(r.buf) == 0 {
		if r.cfg.Limit != 0 && r.read >= r.cfg.Limit {
			r.f.close()
			return nil, io.EOF
		}
		resp, err := r.f.next(ctx, func(ctx context.Context, cc *grpc.ClientConn) (func() (*logstorepb.ReadTopicResponse, error), error) {
			req := &logstorepb.ReadTopicRequest{Topic: r.cfg.Topic, FromOffset: r.next, Follow: true}
			if r.cfg.Limit != 0 {
				req.MaxMessages = r.cfg.Limit - r.read
			}
			s, err := logstorepb.NewLogStoreClient(cc).ReadTopic(ctx, req)
			if err != nil {
				return nil, err
			}
			return s.Recv, nil
		})
		if errors.Is(err, io.EOF) {
			if err := r.f.pause(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		want := r.next
		for _, m := range resp.Messages {
			if m.Offset != want {
				r.f.close()
				return nil, fmt.Errorf("%w: node %s sent topic %q offset %d, next is %d", ErrContinuity, r.f.addr, r.cfg.Topic, m.Offset, want)
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
	r.next, r.read = m.Offset+1, r.read+1
	return m, nil
}

// Close ends the reader's stream.
func (r *TopicReader) Close() { r.f.close() }
