package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
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
	// ErrProducerFenced: another instance registered the producer's name
	// since this one did (the cluster answered PRODUCER_FENCED): this one is
	// a zombie. It does not register again by itself; every call returns
	// the *FencedError.
	ErrProducerFenced = errors.New("client: producer fenced by a newer instance")
)

// InDoubtError is returned when an Append's outcome is unknown.
type InDoubtError struct {
	// ProducerID is the registered id the transaction was sent with (not
	// the name: see Producer.ID and Producer.Name).
	ProducerID string
	Epoch      uint64
	Sequence   uint64
	// Lost: the cluster no longer holds the producer's row (it answered
	// UNKNOWN_PRODUCER: the row expired idle while this transaction was in
	// flight), so its outcome cannot be learned from the cluster: Resolve
	// returns this error again (once) and the producer goes on, registered
	// anew. Find out by reading the log after AfterLSN.
	Lost bool
	// AfterLSN: the transaction, if it committed, has an LSN above this one
	// (the highest LSN the producer had been answered when it sent it).
	AfterLSN types.LSN
	Err      error // the last attempt's error
}

func (e *InDoubtError) Error() string {
	if e.Lost {
		return fmt.Sprintf("client: producer %s epoch %d sequence %d: outcome unknown and cannot be learned (the cluster forgot the producer; look for it in the log after lsn %d): %v", e.ProducerID, e.Epoch, e.Sequence, e.AfterLSN, e.Err)
	}
	return fmt.Sprintf("client: producer %s epoch %d sequence %d: outcome unknown, call Resolve: %v", e.ProducerID, e.Epoch, e.Sequence, e.Err)
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
	// Conflict: Sequence was found committed with other content
	// (SEQUENCE_REUSED: the cluster keeps a digest of each remembered
	// request), or the first send of Sequence found it already committed:
	// another producer instance uses this id. This transaction was not
	// written.
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

// FencedError is returned once a newer instance registered the
// producer's name: this instance must stop.
type FencedError struct {
	Name     string
	Epoch    uint64 // this instance's
	Current  uint64 // the newer instance's (0: unknown)
	Sequence uint64
	// InDoubt: an earlier attempt of Sequence may have committed.
	InDoubt bool
	Err     error
}

func (e *FencedError) Error() string {
	s := fmt.Sprintf("client: producer %q epoch %d fenced by epoch %d (another instance registered the name): stop this one", e.Name, e.Epoch, e.Current)
	if e.InDoubt {
		s += fmt.Sprintf("; sequence %d may have committed", e.Sequence)
	}
	return s
}

// Is makes errors.Is(err, ErrProducerFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrProducerFenced }
func (e *FencedError) Unwrap() error        { return e.Err }

// ConditionError is a failed condition: nothing of the transaction was
// written.
type ConditionError struct {
	// Group is set for a Txn.ExpectCommitted condition.
	Group string
	Topic string
	// Actual is the topic's next offset, or the group's committed offset.
	Actual types.Offset
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
	// ID is the producer's name (at most 256 bytes), registered with the
	// cluster on first use (InitProducer). Empty picks a random one: "p-"
	// and 32 hex digits. One live instance per name: an instance that
	// registers the name fences the older ones (ErrProducerFenced).
	ID string
	// MaxInFlight is how many of the producer's Appends may wait for their
	// answer at once (1..MaxProducerInFlight; 0: MaxProducerInFlight).
	MaxInFlight int
}

// MaxProducerInFlight is the cluster's window of remembered results per
// producer (logstore/fsm.ProducerWindow; a test keeps them equal): a
// producer never has more sequences unanswered than the cluster can
// answer a retry of.
const MaxProducerInFlight = 5

// Producer appends transactions exactly once. On first use it registers
// its name with the cluster (InitProducer), getting an id and an epoch;
// it numbers its transactions 1, 2, 3, … and resends a sequence until it
// gets an answer, so a retry after a lost response or a leader change
// returns the first result (Result.Duplicate) instead of writing again.
//
// Up to MaxInFlight Appends (concurrent calls) are sent without waiting
// for the earlier ones' answers; the cluster applies a producer's
// sequences in order (a sequence that arrives before its predecessor is
// refused and resent once the predecessor was answered), so the log holds
// them in the order their sequences were assigned.
//
// States: ready; in doubt (some Append ended with ErrInDoubt: Append
// refuses until Resolve answered every one); fenced (ErrProducerFenced)
// or broken (ErrSequenceMismatch): every call returns that error.
// When the cluster answers UNKNOWN_PRODUCER (the producer's row expired
// while idle) the producer registers again (a new id) and resends what
// cannot have been written; what may have been written is reported in
// doubt with InDoubtError.Lost, never as a success.
type Producer struct {
	c      *Client
	name   string
	slots  chan struct{} // one token per Append in flight (capacity MaxInFlight)
	window int           // MaxInFlight: sequences unanswered at most
	gaps   atomic.Int64  // answers refusing a sequence as a gap (resent later)

	mu struct {
		sync.Mutex
		reg         *registration // nil: register before the next send
		registering bool
		next        uint64    // the next sequence of reg
		live        []*flight // sent under reg or an older one, not settled
		pending     []*flight // in doubt, in sequence order
		broken      error
		lastLSN     types.LSN // the highest LSN answered
		changed     chan struct{}
		batchers    map[*grpc.ClientConn]*appendBatcher // one per node connection (bounded by the nodes)
		changes     uint64                              // notifyLocked calls: a flight refused as a gap retries at once when it moved
	}
}

// registration is one InitProducer answer.
type registration struct {
	id    string
	epoch uint64
	// hole is the lowest sequence of the registration that will never be
	// written although later ones were handed out (0: none; guarded by
	// Producer.mu): nothing after it can be applied under the
	// registration, so the producer registers again (a new epoch, fencing
	// every copy still on the network) before sending, and a flight of it
	// above the hole is known not written whatever its attempts were
	// answered (unwritten).
	hole uint64
}

// flight is one transaction the producer sends: its request carries the
// producer fields of reg.
type flight struct {
	req   *logstorepb.AppendRequest
	reg   *registration
	maybe bool // some attempt may have committed
	lost  bool // maybe, and the cluster forgot reg
	// resolving: sent by Resolve (a Lost outcome is returned, not kept).
	resolving bool
	// started is closed when the flight's request was first handed to the
	// connection: its successor waits for it, so a producer's requests
	// leave (and mostly arrive) in sequence order and few are refused as
	// gaps. It belongs to one sequence: assign makes a new one.
	started chan struct{}
	after   types.LSN // lastLSN when it was assigned
	err     error     // the last attempt's error (in doubt)
}

// unwritten reports (under Producer.mu) whether f is above a hole of its
// registration: none of its attempts can have been applied, however they
// were answered, since the cluster applies a registration's sequences in
// order.
func (f *flight) unwritten() bool {
	return f.reg != nil && f.reg.hole != 0 && f.req.Sequence > f.reg.hole
}

func (f *flight) inDoubt() *InDoubtError {
	return &InDoubtError{ProducerID: f.req.ProducerId, Epoch: f.req.ProducerEpoch, Sequence: f.req.Sequence, Lost: f.lost, AfterLSN: f.after, Err: f.err}
}

// NewProducer returns a Producer writing through c. It registers on first
// use (Append, Resolve or NextSequence).
func (c *Client) NewProducer(cfg ProducerConfig) (*Producer, error) {
	if len(cfg.ID) > maxNameBytes {
		return nil, fmt.Errorf("client: producer id is %d bytes, limit %d", len(cfg.ID), maxNameBytes)
	}
	if cfg.MaxInFlight < 0 || cfg.MaxInFlight > MaxProducerInFlight {
		return nil, fmt.Errorf("client: producer MaxInFlight %d, want 1..%d", cfg.MaxInFlight, MaxProducerInFlight)
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = MaxProducerInFlight
	}
	if cfg.ID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		cfg.ID = "p-" + hex.EncodeToString(b[:])
	}
	p := &Producer{c: c, name: cfg.ID, slots: make(chan struct{}, cfg.MaxInFlight), window: cfg.MaxInFlight}
	p.mu.changed = make(chan struct{})
	return p, nil
}

// maxNameBytes is the server's limit on producer ids (logstore.MaxNameLen).
const maxNameBytes = 256

// ID returns the producer's name (ProducerConfig.ID).
func (p *Producer) ID() string { return p.name }

// RegisteredID returns the id and epoch the cluster gave this producer
// (empty before the first registration).
func (p *Producer) RegisteredID() (id string, epoch uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.mu.reg; r != nil {
		return r.id, r.epoch
	}
	return "", 0
}

// NextSequence returns the sequence the next transaction will carry. While
// a transaction is in doubt it is that transaction's sequence (not used up
// until Resolve settles it).
func (p *Producer) NextSequence(ctx context.Context) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.broken != nil {
		return 0, p.mu.broken
	}
	if len(p.mu.pending) > 0 {
		return p.mu.pending[0].req.Sequence, nil
	}
	if p.mu.reg == nil || p.mu.reg.hole != 0 {
		return 1, nil // a new registration starts at 1
	}
	return p.mu.next, nil
}

// InitProducer registers name (see logstorepb's InitProducer). A retry
// after an unknown outcome may register twice: the later epoch wins.
// FEATURE_NOT_ENABLED (the cluster has not reached version 3 yet: a
// rolling upgrade, or a new cluster before its first version poll) is
// retried with backoff until ctx ends.
func (c *Client) InitProducer(ctx context.Context, name string) (id string, epoch uint64, err error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	for backoff := featureBackoffMin; ; backoff = min(2*backoff, featureBackoffMax) {
		err = c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			resp, err := logstorepb.NewLogStoreClient(cc).InitProducer(ctx, &logstorepb.InitProducerRequest{Name: name})
			if err == nil {
				id, epoch = resp.ProducerId, resp.Epoch
			}
			return err
		})
		if apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
			return id, epoch, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", 0, err
		case <-t.C:
		}
	}
}

// The backoff of InitProducer while the cluster runs below version 3.
const (
	featureBackoffMin = 50 * time.Millisecond
	featureBackoffMax = time.Second
)

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
//   - the server's refusal (InvalidArgument for a malformed transaction,
//     PERMISSION_DENIED, …) when no attempt can have written it (every
//     attempt's apierr.AppliedOf was AppliedNo);
//   - a *InDoubtError (ErrInDoubt) when ctx ended with the outcome unknown,
//     when an attempt may have committed and a later one was refused, or
//     when the cluster forgot the producer while the outcome was unknown
//     (Lost): call Resolve before the next Append. Also when txn was not
//     written but keeps its place (its Err says "not written"): it was
//     refused behind an earlier sequence still unanswered or in doubt, or
//     one that will never be written; Resolve writes it in its order. A
//     pipelined transaction never leaves a hole under the sequences sent
//     after it while their fate is open (they could not be written any
//     more, and their callers would be told nothing true);
//   - a *FencedError (ErrProducerFenced): a newer instance registered the
//     name; this one is done;
//   - a *SequenceError (ErrSequenceMismatch): the producer is broken;
//   - other errors (ErrClosed, a context error before anything was sent,
//     TABLE_FULL from the registration) when nothing can have been written.
func (p *Producer) Append(ctx context.Context, txn *Txn) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	ctx, cancel := p.c.withDeadline(ctx)
	defer cancel()
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.slots }()
	f := &flight{req: txn.Request()}
	if err := p.assign(ctx, f); err != nil {
		return nil, err
	}
	return p.run(ctx, f)
}

// Resolve resends the earliest in-doubt transaction with its sequence and
// returns its outcome as Append would: its Result (Duplicate when it had
// committed before), or the error that settles it; a Lost one (its
// outcome cannot be learned) is returned once more as its *InDoubtError
// and dropped. It returns (nil, nil) when nothing is in doubt, and
// ErrInDoubt again when ctx ends first. In-doubt transactions known not
// written (behind a sequence that never will be) are sent under a new
// registration, all of them in their order: their Results carry new
// sequences.
func (p *Producer) Resolve(ctx context.Context) (*Result, error) {
	ctx, cancel := p.c.withDeadline(ctx)
	defer cancel()
	p.mu.Lock()
	if len(p.mu.pending) > 0 && p.mu.pending[0].unwritten() {
		// Nothing pending was written (all of one registration, above its
		// hole): send them again under a new one, in their order.
		if err := p.renumberLocked(ctx); err != nil && p.mu.broken == nil && len(p.mu.pending) > 0 {
			d := p.mu.pending[0].inDoubt()
			d.Err = err
			p.mu.Unlock()
			return nil, d
		}
	}
	if p.mu.broken != nil {
		return nil, p.brokenUnlock()
	}
	if len(p.mu.pending) == 0 {
		p.mu.Unlock()
		return nil, nil
	}
	f := p.mu.pending[0]
	p.mu.pending = p.mu.pending[1:]
	if f.lost {
		p.notifyLocked()
		p.mu.Unlock()
		return nil, f.inDoubt()
	}
	f.resolving = true
	p.mu.live = append(p.mu.live, f)
	p.mu.Unlock()
	return p.run(ctx, f)
}

// batcher is the producer's own batcher on cc: serial (one call in
// flight), so its pipelined requests leave in sequence order in one
// AppendBatch call and enter the leader's intake in that order; with
// several calls in flight the server could take them in any order and
// refuse the early arrivals as gaps (each costing a round trip).
func (p *Producer) batcher(cc *grpc.ClientConn) *appendBatcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.mu.batchers[cc]
	if b == nil {
		if p.mu.batchers == nil {
			p.mu.batchers = map[*grpc.ClientConn]*appendBatcher{}
		}
		b = newAppendBatcher(cc, p.c.cfg.MaxBatchBytes)
		b.serial = true
		p.mu.batchers[cc] = b
	}
	return b
}

// brokenUnlock returns p.mu.broken and releases p.mu.
func (p *Producer) brokenUnlock() error {
	err := p.mu.broken
	p.mu.Unlock()
	return err
}

// notifyLocked wakes every goroutine waiting for a change of p.mu.
func (p *Producer) notifyLocked() {
	p.mu.changes++
	close(p.mu.changed)
	p.mu.changed = make(chan struct{})
}

// waitLocked releases p.mu until the next change or ctx's end, and takes
// it again.
func (p *Producer) waitLocked(ctx context.Context) error {
	ch := p.mu.changed
	p.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	return err
}

// renumberLocked registers anew and gives the pending flights, never
// written (above a hole of their registration), the first sequences of the
// new registration in their order, so Resolve sends them as they were
// pipelined. It waits for the live flights to settle first (the new epoch
// fences them). p.mu is held on entry and return, released meanwhile.
func (p *Producer) renumberLocked(ctx context.Context) error {
	for {
		switch {
		case p.mu.broken != nil:
			return p.mu.broken
		case len(p.mu.pending) == 0 || !p.mu.pending[0].unwritten():
			return nil // renumbered meanwhile by another Resolve
		case p.mu.registering || len(p.mu.live) > 0:
			if err := p.waitLocked(ctx); err != nil {
				return err
			}
		default:
			if err := p.registerLocked(ctx); err != nil {
				return err
			}
			for _, f := range p.mu.pending {
				p.numberLocked(f)
			}
			return nil
		}
	}
}

// registerLocked registers the producer's name and makes the answer the
// current registration (p.mu released meanwhile).
func (p *Producer) registerLocked(ctx context.Context) error {
	p.mu.registering = true
	p.mu.Unlock()
	id, epoch, err := p.c.InitProducer(ctx, p.name)
	p.mu.Lock()
	p.mu.registering = false
	p.notifyLocked()
	if err != nil {
		return err
	}
	p.mu.reg, p.mu.next = &registration{id: id, epoch: epoch}, 1
	return nil
}

// numberLocked gives f the next sequence of the current registration.
func (p *Producer) numberLocked(f *flight) {
	r := p.mu.reg
	f.reg, f.maybe, f.lost, f.after = r, false, false, p.mu.lastLSN
	f.req.ProducerId, f.req.ProducerEpoch, f.req.Sequence = r.id, r.epoch, p.mu.next
	f.started = make(chan struct{})
	p.mu.next++
}

// assign gives f the next sequence of the current registration,
// registering first when there is none (first use, the cluster forgot
// the producer, or a hole).
func (p *Producer) assign(ctx context.Context, f *flight) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.mu.broken != nil:
			return p.mu.broken
		case len(p.mu.pending) > 0:
			d := p.mu.pending[0].inDoubt()
			d.Err = errors.New("an earlier transaction is in doubt; Resolve it first")
			return d
		case p.mu.reg != nil && p.mu.reg.hole == 0 && !p.windowFullLocked():
			p.numberLocked(f)
			p.mu.live = append(p.mu.live, f)
			return nil
		case p.mu.reg != nil && p.mu.reg.hole == 0: // window full: wait for the oldest answer
			if err := p.waitLocked(ctx); err != nil {
				return err
			}
		case p.mu.registering || len(p.mu.live) > 0:
			// Let what was sent under the old registration settle first: a
			// new epoch fences it.
			if err := p.waitLocked(ctx); err != nil {
				return err
			}
		default:
			if err := p.registerLocked(ctx); err != nil {
				return err // nothing of f was sent
			}
		}
	}
}

// windowFullLocked reports whether the next sequence would push the
// oldest unanswered one of the registration out of the cluster's window
// of remembered results (then a retry of it could not be answered): the
// in-flight bound is on sequences, not only on calls.
func (p *Producer) windowFullLocked() bool {
	for _, f := range p.mu.live {
		if f.reg == p.mu.reg && p.mu.next >= f.req.Sequence+uint64(p.window) {
			return true
		}
	}
	return false
}

// settleLocked removes f from the live flights (and releases its
// successor's wait for its first send, should it never have sent: only
// f's own goroutine closes started).
func (p *Producer) settleLocked(f *flight) {
	if f.started != nil {
		select {
		case <-f.started:
		default:
			close(f.started)
		}
	}
	if i := slices.Index(p.mu.live, f); i >= 0 {
		p.mu.live = slices.Delete(p.mu.live, i, i+1)
	}
	p.notifyLocked()
}

// doubtLocked settles f as in doubt (kept for Resolve) and returns its error.
func (p *Producer) doubtLocked(f *flight, err error) error {
	p.settleLocked(f)
	f.err = err
	if f.lost && f.resolving {
		return f.inDoubt() // settled: its outcome cannot be learned
	}
	// Every pending flight is of one registration: a new one is made only
	// while none is pending, or for all of them (renumberLocked).
	i, _ := slices.BinarySearchFunc(p.mu.pending, f, func(a, b *flight) int { return cmp.Compare(a.req.Sequence, b.req.Sequence) })
	p.mu.pending = slices.Insert(p.mu.pending, i, f)
	return f.inDoubt()
}

// unusedLocked settles f as never written: its sequence is free again
// when it was the last one handed out, else it is a hole.
func (p *Producer) unusedLocked(f *flight) {
	p.settleLocked(f)
	if f.reg != p.mu.reg {
		return
	}
	if f.req.Sequence == p.mu.next-1 {
		p.mu.next--
		return
	}
	if r := f.reg; r.hole == 0 || f.req.Sequence < r.hole {
		r.hole = f.req.Sequence
	}
}

// blockedLocked reports why f, refused as a gap (an earlier sequence not
// applied), cannot be applied under its registration any more: the
// registration is gone or replaced, an earlier sequence will never be
// written (hole), or an earlier one is in doubt. "" while it may still be
// applied once the earlier flights are answered.
func (p *Producer) blockedLocked(f *flight) string {
	switch {
	case f.unwritten():
		return "hole"
	case f.reg != p.mu.reg:
		return "registration replaced"
	}
	for _, d := range p.mu.pending {
		if d.reg == f.reg && d.req.Sequence < f.req.Sequence {
			return "earlier in doubt"
		}
	}
	return ""
}

// earlierUnsettledLocked returns a flight of f's registration before f
// that is still in flight or in doubt (nil: none): one that may yet be
// applied, after which f could be.
func (p *Producer) earlierUnsettledLocked(f *flight) *flight {
	for _, g := range slices.Concat(p.mu.live, p.mu.pending) {
		if g != f && g.reg == f.reg && g.req.Sequence < f.req.Sequence && !g.unwritten() {
			return g
		}
	}
	return nil
}

// run sends f until it is settled and returns its outcome.
func (p *Producer) run(ctx context.Context, f *flight) (*Result, error) {
	for {
		p.mu.Lock()
		start := p.mu.changes
		p.mu.Unlock()
		resp, conflict, err := p.sendOnce(ctx, f)
		d := apierr.Detail(err)
		p.mu.Lock()
		if resp != nil && resp.Lsn > uint64(p.mu.lastLSN) {
			p.mu.lastLSN = types.LSN(resp.Lsn)
		}
		switch code := d.GetCode(); {
		case err == nil && conflict:
			p.settleLocked(f)
			p.mu.broken = &SequenceError{ProducerID: f.req.ProducerId, Sequence: f.req.Sequence, Conflict: true}
			return nil, p.brokenUnlock()
		case err == nil:
			p.settleLocked(f)
			p.mu.Unlock()
			return newResult(resp, f.req.Sequence), nil
		case code == logstorepb.ErrorCode_CONDITION_FAILED: // the sequence is used up
			p.settleLocked(f)
			p.mu.Unlock()
			return nil, &ConditionError{Group: d.Group, Topic: d.Topic, Actual: types.Offset(d.ActualNextOffset), Err: err}
		case code == logstorepb.ErrorCode_PRODUCER_FENCED:
			p.settleLocked(f)
			if p.mu.broken == nil {
				p.mu.broken = &FencedError{Name: p.name, Epoch: f.req.ProducerEpoch, Current: d.Epoch, Sequence: f.req.Sequence, InDoubt: f.maybe, Err: err}
			}
			return nil, p.brokenUnlock()
		case code == logstorepb.ErrorCode_UNKNOWN_PRODUCER:
			if p.mu.reg == f.reg {
				p.mu.reg = nil // register again before the next send
			}
			if f.maybe {
				f.lost = true
				err = p.doubtLocked(f, err)
				p.mu.Unlock()
				return nil, err
			}
			p.settleLocked(f) // nothing written: send it under the new registration
			p.mu.Unlock()
			if err := p.assign(ctx, f); err != nil {
				return nil, err
			}
			continue
		case code == logstorepb.ErrorCode_SEQUENCE_MISMATCH && d.ExpectedSequence < f.req.Sequence:
			// A gap: an earlier sequence has not been applied (yet).
			p.gaps.Add(1)
			if why := p.blockedLocked(f); why != "" {
				// After a hole nothing of f's registration can be applied
				// any more, whatever reached the cluster.
				switch {
				case why == "registration replaced" && f.maybe:
					f.lost = true
					err = p.doubtLocked(f, err)
					p.mu.Unlock()
					return nil, err
				case why == "earlier in doubt":
					// Written or not, f can only be applied after that
					// one: it keeps its place, in doubt, and Resolve sends
					// it after that one. (Settled as unused it would leave
					// a hole: none of the sequences sent after it could be
					// applied any more under the registration.)
					if !f.maybe {
						err = fmt.Errorf("not written yet: refused behind an earlier sequence in doubt; last attempt: %w", err)
					}
					err = p.doubtLocked(f, err)
					p.mu.Unlock()
					if f.resolving {
						return p.Resolve(ctx)
					}
					return nil, err
				case why == "hole" && len(p.mu.pending) > 0:
					// Never written, like every flight after it: it keeps
					// its place among the pending ones, and Resolve sends
					// those above the hole under a new registration in
					// their order.
					err = p.doubtLocked(f, fmt.Errorf("not written: behind sequence %d, which never will be (Resolve sends it again under a new registration); last attempt: %w", f.reg.hole, err))
					p.mu.Unlock()
					if f.resolving {
						return p.Resolve(ctx)
					}
					return nil, err
				}
				p.unusedLocked(f) // never written: send it under a new registration
				p.mu.Unlock()
				if err := p.assign(ctx, f); err != nil {
					return nil, err
				}
				continue
			}
			if p.mu.changes != start { // an earlier flight was answered meanwhile
				p.mu.Unlock()
				continue
			}
			if werr := p.waitLocked(ctx); werr != nil {
				if g := p.earlierUnsettledLocked(f); g != nil && !f.unwritten() {
					// f was not written, but the earlier sequence it waits
					// for may still commit (in flight or in doubt):
					// settling f as unused would leave a hole, so that
					// none of the sequences sent after f could be applied
					// any more under the registration. f keeps its place,
					// in doubt: Resolve sends it after that one.
					err = p.doubtLocked(f, fmt.Errorf("%w (not written yet: refused behind sequence %d, whose outcome is unknown; last attempt: %v)", werr, g.req.Sequence, err))
					p.mu.Unlock()
					return nil, err
				}
				err = p.giveUpLocked(ctx, f, err)
				p.mu.Unlock()
				return nil, err
			}
			p.mu.Unlock()
			continue
		case code == logstorepb.ErrorCode_SEQUENCE_REUSED:
			// The cluster holds other content under f's sequence (another
			// instance uses this id and epoch): f was not written under it
			// and never can be, and this producer's sequences are no longer
			// its own.
			p.settleLocked(f)
			p.mu.broken = &SequenceError{ProducerID: f.req.ProducerId, Sequence: f.req.Sequence, Conflict: true, Err: err}
			return nil, p.brokenUnlock()
		case code == logstorepb.ErrorCode_SEQUENCE_MISMATCH || code == logstorepb.ErrorCode_SEQUENCE_TOO_OLD:
			p.settleLocked(f)
			p.mu.broken = &SequenceError{ProducerID: f.req.ProducerId, Sequence: f.req.Sequence, Expected: d.ExpectedSequence, InDoubt: f.maybe, Err: err}
			return nil, p.brokenUnlock()
		default:
			// Any other refusal (an invalid request too) says only that
			// the last attempt wrote nothing: an earlier one may have
			// committed (f.maybe) before, say, the topic's schema changed.
			err = p.giveUpLocked(ctx, f, err)
			p.mu.Unlock()
			return nil, err
		}
	}
}

// giveUpLocked settles f after its last attempt failed with err: in doubt
// when an attempt may have committed, else unused.
func (p *Producer) giveUpLocked(ctx context.Context, f *flight, err error) error {
	if f.maybe {
		return p.doubtLocked(f, err)
	}
	p.unusedLocked(f)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (nothing sent was written; last attempt: %v)", cerr, err)
	}
	return err
}

// sendOnce sends f's request until the cluster answers (retrying what is
// safe to retry) or ctx ends. conflict: the answer is a duplicate although
// no earlier attempt can have committed.
func (p *Producer) sendOnce(ctx context.Context, f *flight) (resp *logstorepb.AppendResponse, conflict bool, err error) {
	var prev chan struct{}
	p.mu.Lock()
	for _, g := range p.mu.live {
		if g.reg == f.reg && g.req.Sequence+1 == f.req.Sequence {
			prev = g.started
		}
	}
	p.mu.Unlock()
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
		}
	}
	err = p.c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		if err := ctx.Err(); err != nil {
			return apierr.NotSent(err)
		}
		select {
		case <-f.started:
		default:
			close(f.started)
		}
		before := f.maybe
		var err error
		resp, err = p.batcher(cc).append(ctx, f.req)
		switch {
		case err == nil:
			conflict = resp.Duplicate && !before
		case apierr.AppliedOf(err) != apierr.AppliedNo:
			f.maybe = true // this attempt may have committed
		}
		return err
	})
	return resp, conflict, err
}
