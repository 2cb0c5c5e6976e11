package dispatcher

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// Errors returned by the dispatcher.
var (
	ErrUnknownTarget   = errors.New("unknown target")
	ErrDuplicateTarget = errors.New("duplicate target")
	ErrNoTopics        = errors.New("target has no topics")
	// ErrStaleTerm: the caller's term is not the target's current term (an
	// older stream); nothing changed.
	ErrStaleTerm = errors.New("stale target term")
	// ErrBogusAck: a target acked an LSN above everything it was sent in
	// this term and above what it reported at its handshake.
	ErrBogusAck = errors.New("ack beyond what was sent")
)

// Config configures a Dispatcher.
type Config struct {
	// Queue bounds every target's inner queues.
	Queue targetqueue.Config
	// ProgressIdle: Progress gives a marker only to a target that nothing
	// was pushed to for at least this long (by the callers' clocks). A
	// target that receives transactions keeps its applied LSN recent by
	// itself; markers to it would only add a Store.Apply (an fsync) per
	// interval, and with many targets all at the same tick. Zero: no idle
	// requirement.
	ProgressIdle time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if err := c.Queue.Validate(); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Recovery is what a returning target must fetch from the LogStore: the LSNs
// From+1 .. To (inclusive) filtered to its topics, pushed with PushCatchup
// and Term, then FetchingCompleted(Term). Empty (From >= To) means nothing to
// fetch: FetchingCompleted was already called and the target is in N.
type Recovery struct {
	Target string
	Term   types.Term
	From   types.LSN // exclusive: the target's durable applied LSN
	To     types.LSN // inclusive: currentLSN at the return
	Empty  bool
}

// TargetStats is a target's state for metrics and status.
type TargetStats struct {
	State                     targetqueue.State
	Term                      types.Term
	NormalLen, CatchupLen     int
	NormalBytes, CatchupBytes int64
	InFlight                  int
	InFlightBytes             int64
	LastAck                   types.LSN
	CurrentLSN                types.LSN
	// Cumulative counters since AddTarget.
	Returns         uint64 // Return calls (handshakes; term bumps)
	Suspends        uint64 // Suspend calls and slow suspensions
	SlowSuspends    uint64 // suspensions because the normal queue was full (slow target)
	StaleDrops      uint64 // pushes and completions refused for a stale term
	ProgressMarkers uint64
}

// Dispatcher holds the targets and their queues. Safe for concurrent use.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	mu struct {
		sync.Mutex
		currentLSN    types.LSN
		lastTimestamp int64 // log time of the transaction at currentLSN
		targets       map[string]*target
		order         []*target // sorted by id: deterministic dispatch order
	}

	// mutate disables safety mechanisms for the conformance test's mutation
	// runs only (proof that the test has teeth). Always zero in production.
	mutate mutations
}

type mutations struct {
	ignoreTerm     bool // use the current term instead of the caller's
	ignoreLastAck  bool // Dispatch pushes even when lastAck >= LSN
	ignoreBogusAck bool // AckTerm takes an ack above what was sent
	// recoveryEndBehind makes Return end the recovery range one LSN early,
	// the outcome of reading currentLSN and bumping the term in two lock
	// sections while a Dispatch runs in between with the old term.
	recoveryEndBehind bool
}

// target is one target's dispatcher-side state; guarded by Dispatcher.mu.
type target struct {
	id       string
	topics   map[string]struct{}
	q        *targetqueue.Queue
	lastAck  types.LSN
	lastPush int64    // dispatch time (Unix ns) of the last message pushed
	recovery Recovery // of the current term; meaningful in RF and FC
	stats    TargetStats
}

// New returns a dispatcher whose main stream will deliver startLSN+1,
// startLSN+2, … (every committed transaction, densely). Invalid cfg panics
// (check it with cfg.Queue.Validate where configuration enters).
func New(cfg Config, startLSN types.LSN) *Dispatcher {
	if err := cfg.validate(); err != nil {
		panic("dispatcher: " + err.Error())
	}
	d := &Dispatcher{cfg: cfg, log: cfg.Logger}
	d.mu.currentLSN = startLSN
	d.mu.targets = make(map[string]*target)
	return d
}

// AddTarget registers a target subscribed to topics. It starts in S (term 1)
// until Return reports its handshake.
func (d *Dispatcher) AddTarget(id string, topics []string) error {
	if len(topics) == 0 {
		return fmt.Errorf("%w: %q", ErrNoTopics, id)
	}
	t := &target{id: id, topics: make(map[string]struct{}, len(topics)), q: targetqueue.New(d.cfg.Queue)}
	for _, topic := range topics {
		t.topics[topic] = struct{}{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mu.targets[id]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateTarget, id)
	}
	d.mu.targets[id] = t
	i, _ := slices.BinarySearchFunc(d.mu.order, id, func(t *target, id string) int { return strings.Compare(t.id, id) })
	d.mu.order = slices.Insert(d.mu.order, i, t)
	d.traceTargets()
	return nil
}

// RemoveTarget forgets a target and drops its queues. Unknown ids are
// ignored. Its fetchers' later pushes return DroppedStale.
func (d *Dispatcher) RemoveTarget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mu.targets[id]; !ok {
		return
	}
	delete(d.mu.targets, id)
	d.mu.order = slices.DeleteFunc(d.mu.order, func(t *target) bool { return t.id == id })
}

// CurrentLSN returns the LSN of the last transaction dispatched from the main
// stream (startLSN before the first).
func (d *Dispatcher) CurrentLSN() types.LSN {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.currentLSN
}

// Dispatch delivers one main-stream transaction; txn.Lsn must be
// CurrentLSN()+1 (anything else is a bug and panics with the numbers). Under
// the lock, for every target subscribed to one of the transaction's topics
// whose last ack is below the LSN, it pushes a message holding only that
// target's slices with the target's current term, then advances currentLSN.
//
// wake lists the targets whose queue received the message (their sender
// should call NextBatch). slow lists the targets whose normal queue was full:
// they are now suspended (queues cleared, state S); the caller must close
// their stream and reconnect, and they recover from the LogStore like any
// returning target.
func (d *Dispatcher) Dispatch(txn *logstorepb.Transaction, dispatchedUnixNano int64) (wake, slow []string) {
	var sizes sliceSizes
	sizes.compute(txn.Slices)

	lsn := types.LSN(txn.Lsn)

	d.mu.Lock()
	if lsn != d.mu.currentLSN+1 {
		cur := d.mu.currentLSN
		d.mu.Unlock()
		panic(fmt.Sprintf("dispatcher: main stream LSN %d after current LSN %d (want %d)", lsn, cur, cur+1))
	}
	for _, t := range d.mu.order {
		if t.lastAck >= lsn && !d.mutate.ignoreLastAck {
			continue
		}
		m, ok := t.msg(txn, &sizes, dispatchedUnixNano)
		if !ok {
			continue
		}
		switch res := t.q.Push(m, true, t.q.Term()); res {
		case targetqueue.Pushed:
			t.lastPush = dispatchedUnixNano
			wake = append(wake, t.id)
		case targetqueue.DroppedSuspended:
		case targetqueue.Overflow:
			t.q.Suspend()
			t.stats.Suspends++
			t.stats.SlowSuspends++
			slow = append(slow, t.id)
		default:
			panic(fmt.Sprintf("dispatcher: main push of LSN %d to %q with its current term: %s", lsn, t.id, res))
		}
	}
	d.mu.currentLSN = lsn
	d.mu.lastTimestamp = txn.TimestampUnixNano
	d.traceDispatch(txn, wake, slow)
	d.mu.Unlock()

	for _, id := range slow {
		d.log.Warn("target queue full: suspending slow target for recovery", "target", id, "lsn", lsn)
	}
	return wake, slow
}

// Return records a target's successful handshake with its durable applied
// LSN. Atomically with respect to Dispatch it sets lastAck = applied, bumps
// the term (queues cleared, state RF) and fixes the recovery range
// (applied, currentLSN]. If that range is empty it calls FetchingCompleted at
// once (state N) and returns Empty. Errors: ErrUnknownTarget.
func (d *Dispatcher) Return(id string, applied types.LSN) (Recovery, error) {
	d.mu.Lock()
	t, ok := d.mu.targets[id]
	if !ok {
		d.mu.Unlock()
		return Recovery{}, fmt.Errorf("%w: %q", ErrUnknownTarget, id)
	}
	prevAck := t.lastAck
	t.lastAck = applied
	term := t.q.Return()
	r := Recovery{Target: id, Term: term, From: applied, To: d.mu.currentLSN}
	if d.mutate.recoveryEndBehind && r.To > applied {
		r.To--
	}
	if applied >= d.mu.currentLSN {
		r.Empty = true
		if !t.q.FetchingCompleted(term) {
			panic(fmt.Sprintf("dispatcher: FetchingCompleted(%d) refused right after Return of %q: %s", term, id, t.q))
		}
	}
	t.recovery = r
	t.stats.Returns++
	d.traceReturn(id, &r)
	d.mu.Unlock()

	if applied < prevAck {
		d.log.Warn("target returned behind its last ack: redelivering", "target", id, "applied", applied, "last_ack", prevAck, "term", term)
	}
	d.log.Info("target returned", "target", id, "term", term, "applied", applied, "recovery_to", r.To, "empty", r.Empty)
	return r, nil
}

// PushCatchup pushes one transaction of a recovery stream of term, filtered
// to the target's topics (a transaction with none of them is skipped and
// reports Pushed). DroppedStale: the term is over (or the target was
// removed): the fetcher must stop. DroppedSuspended: the target is down: the
// fetcher must stop. Overflow: the catchup queue is full: retry after the
// sender's NextBatch makes room (recovery fetchers wait, they never suspend
// the target).
//
// The LSNs of one term must strictly increase and lie in the recovery range;
// anything else panics.
func (d *Dispatcher) PushCatchup(id string, term types.Term, txn *logstorepb.Transaction, dispatchedUnixNano int64) (res targetqueue.PushResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if traceOn {
		defer d.tracePushCatchup(id, term, types.LSN(txn.Lsn), &res)
	}
	t, ok := d.mu.targets[id]
	if !ok {
		return targetqueue.DroppedStale
	}
	if d.mutate.ignoreTerm {
		term = t.q.Term()
	}
	if term != t.q.Term() {
		t.stats.StaleDrops++
		return targetqueue.DroppedStale
	}
	if t.q.State() == targetqueue.Suspended {
		return targetqueue.DroppedSuspended
	}
	lsn := types.LSN(txn.Lsn)
	if r := t.recovery; !d.mutate.ignoreTerm && (lsn <= r.From || lsn > r.To) {
		panic(fmt.Sprintf("dispatcher: catchup LSN %d for %q outside recovery range (%d, %d] of term %d", lsn, id, r.From, r.To, term))
	}
	// No last-ack filter here: the range starts at the last ack, and in RF
	// only catchup messages pushed before are sent and acked, so lastAck
	// stays below the next LSN (tla/LogPlayer.tla: CatchupAboveAck).
	var sizes sliceSizes
	sizes.compute(txn.Slices)
	m, ok := t.msg(txn, &sizes, dispatchedUnixNano)
	if !ok {
		return targetqueue.Pushed
	}
	res = t.q.Push(m, false, term)
	if res == targetqueue.Pushed {
		t.lastPush = dispatchedUnixNano
	}
	return res
}

// FetchingCompleted is called by the recovery fetcher of term after its last
// PushCatchup. It reports whether the queue left RF (to FC, or to N if the
// catchup queue was already drained: then the sender should be woken).
// False for a stale term, a target not in RF, or an unknown target.
func (d *Dispatcher) FetchingCompleted(id string, term types.Term) (left bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if traceOn {
		defer d.traceFetchingCompleted(id, term, &left)
	}
	t, ok := d.mu.targets[id]
	if !ok {
		return false
	}
	if d.mutate.ignoreTerm {
		term = t.q.Term()
	}
	if term != t.q.Term() {
		t.stats.StaleDrops++
	}
	return t.q.FetchingCompleted(term)
}

// Suspend marks a target down (stream failed): queues and in-flight list
// cleared, state S. The term changes only at the next Return. Unknown ids
// are ignored.
func (d *Dispatcher) Suspend(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.mu.targets[id]; ok {
		t.q.Suspend()
		t.stats.Suspends++
		d.traceSuspend(id)
	}
}

// NextBatchForTerm takes the next batch for the sender of the stream of term
// (see targetqueue.NextBatch). It returns nil, false (taking nothing) when
// term is not the target's current term or the target is unknown, so that a
// sender of an older stream can never take messages meant for the new one.
func (d *Dispatcher) NextBatchForTerm(id string, term types.Term, maxCount int, maxBytes int64) (batch []targetqueue.Msg, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if traceOn {
		defer d.traceNextBatch(id, term, maxCount, &batch, &ok)
	}
	t, ok := d.mu.targets[id]
	if !ok {
		return nil, false
	}
	if d.mutate.ignoreTerm {
		term = t.q.Term()
	}
	if term != t.q.Term() {
		return nil, false
	}
	return t.q.NextBatch(maxCount, maxBytes), true
}

// AckTerm records the cumulative ack of the receiver of the stream of term:
// lastAck = max(lastAck, lsn), and the in-flight messages with LSN <= lsn are
// released. Errors (nothing changes): ErrUnknownTarget; ErrStaleTerm when term is not current (an
// older stream's late ack); ErrBogusAck when lsn is above both the last LSN
// sent in this term and lastAck (the target claims what it was never sent).
func (d *Dispatcher) AckTerm(id string, term types.Term, lsn types.LSN) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if traceOn {
		defer d.traceAck(id, term, lsn, &err)
	}
	t, ok := d.mu.targets[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTarget, id)
	}
	if term != t.q.Term() {
		return fmt.Errorf("%w: ack %d from %q with term %d, current %d", ErrStaleTerm, lsn, id, term, t.q.Term())
	}
	if lsn > t.lastAck && lsn > t.q.LastSent() && !d.mutate.ignoreBogusAck {
		return fmt.Errorf("%w: %q acked %d, sent up to %d, last ack %d", ErrBogusAck, id, lsn, t.q.LastSent(), t.lastAck)
	}
	t.ack(lsn)
	return nil
}

func (t *target) ack(lsn types.LSN) {
	t.lastAck = max(t.lastAck, lsn)
	t.q.Ack(lsn)
}

// Progress pushes a progress marker Msg{LSN: currentLSN} (no slices) to a
// target that is in N with empty queues and nothing in flight, and whose
// last ack is below currentLSN: everything it needs up to currentLSN is
// then applied, so the marker safely advances its applied LSN (shortening
// its recovery range and the restart point). With Config.ProgressIdle, only
// to a target nothing was pushed to for that long before nowUnixNano.
// Reports whether it pushed (the caller then wakes the target's sender).
func (d *Dispatcher) Progress(id string, nowUnixNano int64) (pushed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if traceOn {
		defer d.traceProgress(id, &pushed)
	}
	t, ok := d.mu.targets[id]
	if !ok || !d.progressDueLocked(t, nowUnixNano) {
		return false
	}
	m := targetqueue.Msg{LSN: d.mu.currentLSN, TimestampUnixNano: d.mu.lastTimestamp, DispatchedUnixNano: nowUnixNano}
	if res := t.q.Push(m, true, t.q.Term()); res != targetqueue.Pushed {
		panic(fmt.Sprintf("dispatcher: progress marker %d to empty queue of %q: %s", m.LSN, id, res))
	}
	t.lastPush = nowUnixNano
	t.stats.ProgressMarkers++
	return true
}

// progressDueLocked reports whether t should get a progress marker at now:
// in N, nothing queued or in flight, last ack below currentLSN, nothing
// pushed for ProgressIdle.
func (d *Dispatcher) progressDueLocked(t *target, now int64) bool {
	if t.q.State() != targetqueue.Normal || t.lastAck >= d.mu.currentLSN ||
		d.cfg.ProgressIdle > 0 && now-t.lastPush < int64(d.cfg.ProgressIdle) {
		return false
	}
	n, c := t.q.Len()
	f, _ := t.q.InFlight()
	return n == 0 && c == 0 && f == 0
}

// Stats returns a target's state and counters.
func (d *Dispatcher) Stats(id string) (TargetStats, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.mu.targets[id]
	if !ok {
		return TargetStats{}, false
	}
	s := t.stats
	s.State, s.Term = t.q.State(), t.q.Term()
	s.NormalLen, s.CatchupLen = t.q.Len()
	s.NormalBytes, s.CatchupBytes = t.q.Bytes()
	s.InFlight, s.InFlightBytes = t.q.InFlight()
	s.LastAck, s.CurrentLSN = t.lastAck, d.mu.currentLSN
	return s, true
}

// Targets returns the registered target ids in sorted order.
func (d *Dispatcher) Targets() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]string, len(d.mu.order))
	for i, t := range d.mu.order {
		ids[i] = t.id
	}
	return ids
}

// MinAck returns the lowest last ack over all targets (the LSN below which
// every target has everything: a retention floor and restart point), or
// CurrentLSN when there are no targets.
func (d *Dispatcher) MinAck() types.LSN {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.mu.order) == 0 {
		return d.mu.currentLSN
	}
	m := d.mu.order[0].lastAck
	for _, t := range d.mu.order[1:] {
		m = min(m, t.lastAck)
	}
	return m
}

// msg builds t's message for txn: only the slices of t's topics. ok is false
// when txn has none of them.
func (t *target) msg(txn *logstorepb.Transaction, sizes *sliceSizes, dispatchedUnixNano int64) (targetqueue.Msg, bool) {
	n := 0
	var bytes int64
	for i, s := range txn.Slices {
		if _, ok := t.topics[s.Topic]; ok {
			n++
			bytes += sizes.at(i)
		}
	}
	if n == 0 {
		return targetqueue.Msg{}, false
	}
	mine := txn.Slices // all of them: share the transaction's slice
	if n < len(txn.Slices) {
		mine = make([]*logstorepb.TxnSlice, 0, n)
		for _, s := range txn.Slices {
			if _, ok := t.topics[s.Topic]; ok {
				mine = append(mine, s)
			}
		}
	}
	return targetqueue.Msg{
		LSN:                types.LSN(txn.Lsn),
		Slices:             mine,
		TimestampUnixNano:  txn.TimestampUnixNano,
		DispatchedUnixNano: dispatchedUnixNano,
		Bytes:              bytes,
	}, true
}

// inlineSizes is how many slice sizes sliceSizes keeps without allocating:
// most transactions touch a handful of topics.
const inlineSizes = 8

// sliceSizes holds the wire size of each slice of one transaction, computed
// once per transaction rather than once per target.
type sliceSizes struct {
	inline [inlineSizes]int64
	more   []int64
}

func (s *sliceSizes) compute(ss []*logstorepb.TxnSlice) {
	if len(ss) > inlineSizes {
		s.more = make([]int64, len(ss))
	}
	for i, sl := range ss {
		size := int64(proto.Size(sl))
		if s.more != nil {
			s.more[i] = size
		} else {
			s.inline[i] = size
		}
	}
}

func (s *sliceSizes) at(i int) int64 {
	if s.more != nil {
		return s.more[i]
	}
	return s.inline[i]
}
