package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Errors of a Producer. Match them with errors.Is; the typed errors
// (*InDoubtError, *SequenceError, *ConditionError) carry the details and
// unwrap to the server's status, so apierr.Detail works on them too.
var (
	// ErrInDoubt: the transaction may or may not have committed (the
	// caller's deadline ended while its outcome was unknown). The producer
	// keeps it: Resolve learns the outcome without writing twice.
	ErrInDoubt = errors.New("client: transaction outcome unknown")
	// ErrSequenceMismatch: the cluster no longer agrees with the producer
	// on its sequence (its entry expired or was evicted from the producer
	// table, or another live producer uses the same id). The producer is
	// unusable; make a new one.
	ErrSequenceMismatch = errors.New("client: producer sequence mismatch")
	// ErrConditionFailed: a condition of the transaction (Txn.Expect,
	// Txn.ExpectCommitted) did not hold; nothing of it was written.
	ErrConditionFailed = errors.New("client: condition failed")
)

// InDoubtError is returned when an Append's outcome is unknown.
type InDoubtError struct {
	ProducerID string
	Sequence   uint64
	Err        error // the last attempt's error
}

func (e *InDoubtError) Error() string {
	return fmt.Sprintf("client: producer %s sequence %d: outcome unknown, call Resolve: %v", e.ProducerID, e.Sequence, e.Err)
}

// Is makes errors.Is(err, ErrInDoubt) true.
func (e *InDoubtError) Is(target error) bool { return target == ErrInDoubt }
func (e *InDoubtError) Unwrap() error        { return e.Err }

// SequenceError is returned when the cluster refuses the producer's
// sequence, or finds it already written by someone else.
type SequenceError struct {
	ProducerID string
	// Sequence is the one the producer sent.
	Sequence uint64
	// Expected is the sequence the cluster expected (1: it does not know
	// the producer any more); 0 when Conflict.
	Expected uint64
	// Conflict: the first send of Sequence found it already committed, so
	// another producer instance uses this id.
	Conflict bool
	// InDoubt: an earlier attempt of Sequence may have committed; its
	// outcome can no longer be learned.
	InDoubt bool
	Err     error // the server's status, when there is one
}

func (e *SequenceError) Error() string {
	var s string
	if e.Conflict {
		s = fmt.Sprintf("client: producer %s sequence %d was already committed by another producer with the same id", e.ProducerID, e.Sequence)
	} else {
		s = fmt.Sprintf("client: producer %s sent sequence %d, cluster expected %d (producer expired, evicted or shared)", e.ProducerID, e.Sequence, e.Expected)
	}
	if e.InDoubt {
		s += "; the outcome of that sequence is unknown"
	}
	return s
}

// Is makes errors.Is(err, ErrSequenceMismatch) true.
func (e *SequenceError) Is(target error) bool { return target == ErrSequenceMismatch }
func (e *SequenceError) Unwrap() error        { return e.Err }

// ConditionError is a failed condition: nothing of the transaction was
// written.
type ConditionError struct {
	// Group is set for a Txn.ExpectCommitted condition.
	Group string
	Topic string
	// Actual is the topic's next offset, or the group's committed offset.
	Actual uint64
	Err    error // the server's status
}

func (e *ConditionError) Error() string {
	if e.Group != "" {
		return fmt.Sprintf("client: condition failed: group %q committed offset of topic %q is %d", e.Group, e.Topic, e.Actual)
	}
	return fmt.Sprintf("client: condition failed: topic %q next offset is %d", e.Topic, e.Actual)
}

// Is makes errors.Is(err, ErrConditionFailed) true.
func (e *ConditionError) Is(target error) bool { return target == ErrConditionFailed }
func (e *ConditionError) Unwrap() error        { return e.Err }

// ProducerConfig configures a Producer.
type ProducerConfig struct {
	// ID names the producer (at most 256 bytes). Empty picks a random one:
	// "p-" and 32 hex digits. Two live producers must never share an id.
	ID string
	// NextSequence is the first sequence to send (default 1). Set it only
	// to continue an id whose next sequence was kept (NextSequence).
	NextSequence uint64
}

// Producer appends transactions exactly once: it sends every transaction
// with its id and the next sequence, and resends the same sequence until
// it gets an answer, so a retry after a lost response or a leader change
// returns the first result (Result.Duplicate) instead of writing again.
//
// The cluster remembers only a producer's last sequence, so a Producer has
// one transaction in flight; concurrent calls wait their turn (within
// their context). Use several producers for parallel writes.
//
// States: ready; in doubt (the last Append ended with ErrInDoubt: Append
// refuses until Resolve answered); broken (ErrSequenceMismatch: every call
// returns that error).
type Producer struct {
	c  *Client
	id string
	// turn is the one-request-in-flight token (capacity 1); its holder owns
	// the fields below. A channel, not a mutex: waiting for it honours ctx.
	turn    chan struct{}
	next    uint64
	pending *logstorepb.AppendRequest // in doubt; nil when none
	broken  error
}

// NewProducer returns a Producer writing through c.
func (c *Client) NewProducer(cfg ProducerConfig) (*Producer, error) {
	if len(cfg.ID) > maxNameBytes {
		return nil, fmt.Errorf("client: producer id is %d bytes, limit %d", len(cfg.ID), maxNameBytes)
	}
	if cfg.ID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		cfg.ID = "p-" + hex.EncodeToString(b[:])
	}
	if cfg.NextSequence == 0 {
		cfg.NextSequence = 1
	}
	return &Producer{c: c, id: cfg.ID, next: cfg.NextSequence, turn: make(chan struct{}, 1)}, nil
}

// maxNameBytes is the server's limit on producer ids (logstore.MaxNameLen).
const maxNameBytes = 256

// ID returns the producer's id.
func (p *Producer) ID() string { return p.id }

// NextSequence returns the sequence the next transaction will carry. While
// a transaction is in doubt it is that transaction's sequence (not used up
// until Resolve settles it).
func (p *Producer) NextSequence(ctx context.Context) (uint64, error) {
	if err := p.acquire(ctx); err != nil {
		return 0, err
	}
	defer p.release()
	return p.next, nil
}

func (p *Producer) acquire(ctx context.Context) error {
	select {
	case p.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Producer) release() { <-p.turn }

// AppendAtomic appends one transaction writing values to each topic of
// slices (all topics or none): the simplest way to publish to several
// topics at once. Topics go into the request in sorted order.
func (p *Producer) AppendAtomic(ctx context.Context, slices map[string][][]byte) (*Result, error) {
	t := NewTxn()
	for _, topic := range sortedTopics(slices) {
		t.Add(topic, slices[topic]...)
	}
	return p.Append(ctx, t)
}

func sortedTopics(m map[string][][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Append commits txn exactly once. It retries with backoff on the leader
// (following NOT_LEADER redirects) until it has an answer or ctx ends (a
// context without a deadline gets Config.CallTimeout). It returns:
//   - the Result (Duplicate when a retry found the first attempt committed);
//   - a *ConditionError when a condition did not hold (the sequence is used
//     up; the producer goes on);
//   - the server's InvalidArgument error for a malformed transaction
//     (nothing was written, the sequence is not used up);
//   - a *InDoubtError (ErrInDoubt) when ctx ended with the outcome unknown:
//     call Resolve before the next Append;
//   - a *SequenceError (ErrSequenceMismatch): the producer is broken;
//   - other errors (ErrClosed, a context error before anything was sent)
//     when nothing can have been written.
func (p *Producer) Append(ctx context.Context, txn *Txn) (*Result, error) {
	if err := p.acquire(ctx); err != nil {
		return nil, err
	}
	defer p.release()
	if p.broken != nil {
		return nil, p.broken
	}
	if p.pending != nil {
		return nil, &InDoubtError{ProducerID: p.id, Sequence: p.pending.Sequence,
			Err: errors.New("an earlier transaction is in doubt; Resolve it first")}
	}
	req := txn.Request()
	req.ProducerId, req.Sequence = p.id, p.next
	return p.send(ctx, req, false)
}

// Resolve resends the in-doubt transaction with its sequence and returns
// its outcome as Append would: its Result (Duplicate when it had committed
// before), or the error that settles it. It returns (nil, nil) when
// nothing is in doubt, and ErrInDoubt again when ctx ends first.
func (p *Producer) Resolve(ctx context.Context) (*Result, error) {
	if err := p.acquire(ctx); err != nil {
		return nil, err
	}
	defer p.release()
	if p.broken != nil {
		return nil, p.broken
	}
	if p.pending == nil {
		return nil, nil
	}
	return p.send(ctx, p.pending, true)
}

// send sends req until it has an answer and updates the producer's state.
// resend is true when an earlier call may have committed req.
func (p *Producer) send(ctx context.Context, req *logstorepb.AppendRequest, resend bool) (*Result, error) {
	maybeCommitted := resend // some attempt may have reached Raft
	conflict := false
	var resp *logstorepb.AppendResponse
	err := p.c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		if err := ctx.Err(); err != nil {
			return err // not sent
		}
		before := maybeCommitted
		var err error
		resp, err = p.c.appendOn(ctx, cc, req)
		switch {
		case err == nil:
			conflict = resp.Duplicate && !before
		case !wroteNothing(err):
			maybeCommitted = true
		}
		return err
	})
	d := apierr.Detail(err)
	switch {
	case err == nil && conflict:
		p.broken = &SequenceError{ProducerID: p.id, Sequence: req.Sequence, Conflict: true}
		return nil, p.broken
	case err == nil:
		p.pending, p.next = nil, req.Sequence+1
		return newResult(resp, req.Sequence), nil
	case d.GetCode() == logstorepb.ErrorCode_CONDITION_FAILED:
		p.pending, p.next = nil, req.Sequence+1
		return nil, &ConditionError{Group: d.Group, Topic: d.Topic, Actual: d.ActualNextOffset, Err: err}
	case d.GetCode() == logstorepb.ErrorCode_SEQUENCE_MISMATCH:
		p.broken = &SequenceError{ProducerID: p.id, Sequence: req.Sequence, Expected: d.ExpectedSequence, InDoubt: maybeCommitted, Err: err}
		return nil, p.broken
	case status.Code(err) == codes.InvalidArgument:
		// Refused at the edge: the same request always is, so no earlier
		// attempt can have committed it. Its sequence stays unused.
		p.pending = nil
		return nil, err
	case !maybeCommitted:
		p.pending = nil
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			return nil, fmt.Errorf("%w (nothing sent was written; last attempt: %v)", cerr, err)
		}
		return nil, err
	default:
		p.pending = req
		return nil, &InDoubtError{ProducerID: p.id, Sequence: req.Sequence, Err: err}
	}
}

// wroteNothing reports whether err is an answer proving that this attempt
// wrote nothing: refused before Raft (validation, NOT_LEADER, QUEUE_FULL,
// SHUTTING_DOWN) or refused by apply (SEQUENCE_MISMATCH, CONDITION_FAILED,
// TABLE_FULL).
func wroteNothing(err error) bool {
	switch apierr.CodeOf(err) {
	case logstorepb.ErrorCode_SEQUENCE_MISMATCH, logstorepb.ErrorCode_CONDITION_FAILED, logstorepb.ErrorCode_TABLE_FULL:
		return true
	}
	if status.Code(err) == codes.InvalidArgument {
		return true
	}
	return apierr.Classify(err) == apierr.NotApplied
}
