package api

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// pending is one request waiting for its Raft entry to apply.
type pending struct {
	cmd  *logstorepb.Command
	size int
	// done has capacity 1 so the completer never blocks on a requester
	// that stopped waiting.
	done chan fsm.Result
}

// Applier is the part of *raft.Raft the Aggregator uses (a fake in tests).
type Applier interface {
	Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture
}

// inflightEntry is one Raft entry the Aggregator handed to Raft.
type inflightEntry struct {
	future raft.ApplyFuture
	data   []byte // the entry's bytes (its key in Sent)
	batch  []*pending
	start  time.Time
}

// resolution tells run that an entry resolved: cmds commands answered
// after commit (both 0 when the entry failed).
type resolution struct {
	cmds   int
	commit time.Duration
}

// The convoy hold (see Aggregator). The window is derived from how long
// the answered clients actually take to come back (their return time:
// from an entry's resolution until as many requests as it answered have
// arrived), not from the commit latency: on a loaded machine the two are
// unrelated. The batch holds for holdMargin × the smoothed return time,
// but only while that is shorter than HoldReturnRatio × a commit (1 by
// default, DefaultHoldReturnRatio): then waiting for the convoy costs less
// than making it wait for the next entry (an open-loop load, whose
// "returns" take a whole round, does not hold), and never for more than
// maxHold (a stalled disk or client must not turn into a linger).
const (
	holdMargin = 1.5
	maxHold    = 10 * time.Millisecond
	// smoothing is the weight of a new sample in the moving averages of
	// commit latency and return time.
	smoothing = 0.125
)

// convoy measures what the hold window is derived from. run only.
type convoy struct {
	commit, back time.Duration // smoothed commit latency and return time
	// A return being timed: since from, need requests still to arrive.
	timing bool
	from   time.Time
	need   int
}

func smooth(avg *time.Duration, sample time.Duration) {
	if *avg == 0 {
		*avg = sample
		return
	}
	*avg += time.Duration(smoothing * float64(sample-*avg))
}

// resolved records an entry answering cmds requests at now after commit.
func (c *convoy) resolved(cmds int, commit time.Duration, now time.Time) {
	smooth(&c.commit, commit)
	if c.timing { // the last convoy is not back a whole entry later
		smooth(&c.back, now.Sub(c.from))
	}
	c.timing, c.from, c.need = true, now, cmds
}

// arrived records n requests taken from intake at now.
func (c *convoy) arrived(n int, now time.Time) {
	if !c.timing {
		return
	}
	if c.need -= n; c.need <= 0 {
		smooth(&c.back, now.Sub(c.from))
		c.timing = false
	}
}

// DefaultHoldReturnRatio is AggregatorConfig.HoldReturnRatio's default:
// hold for the convoy only while its clients come back faster than an
// entry commits.
const DefaultHoldReturnRatio = 1.0

// holdWindow is the hold after a resolution (see holdMargin): none unless
// the smoothed return time is below ratio × the smoothed commit latency.
func holdWindow(c *convoy, ratio float64) time.Duration {
	if c.back == 0 || float64(c.back) >= ratio*float64(c.commit) {
		return 0
	}
	return min(time.Duration(holdMargin*float64(c.back)), maxHold)
}

// Aggregator turns many requests into few Raft entries (docs/DESIGN.md, "Aggregation").
//
// Goroutines: run (fed by submit through intake; owns the batch being built,
// the count of entries in flight, the convoy hold and the leader timestamp)
// and complete (fed by run through inflight; owns the futures, answers each
// request and tells run through freed that an entry resolved).
//
// Batching is group commit without idle linger:
//   - Nothing in flight, nothing resolved within the hold window (the
//     cluster is idle): a request goes out at once, alone if it is alone.
//   - Entries in flight: requests gather in the batch, which goes out when
//     an entry resolves; a batch that reaches PipelineMinTxns commands (or a
//     quarter of MaxBatchBytes) goes out before that, up to
//     MaxInflightEntries entries in flight. Fewer, larger entries mean
//     fewer fsyncs per transaction on every node; under heavy load the
//     pipeline still keeps Raft busy.
//   - Convoy hold: when an entry resolves, the clients it answers (in a
//     closed loop) come straight back. Sending the first returning request
//     alone would split them into two groups that alternate forever, each
//     waiting for the other's entry (measured: entries of 1 and 9 txns with
//     10 clients, half the throughput; or two stable groups of 5). So with
//     nothing in flight, a batch waits until it holds what it held when the
//     entry resolved plus the requests that entry answered (the two groups
//     become one), or until the hold window after the resolution passes
//     (about the time the answered clients took to come back lately; none
//     when they take longer than a commit or do not come back; at most
//     maxHold). A serial client never waits: it alone was answered, and its
//     next request completes the batch; on an idle cluster the window has
//     long passed.
//   - When the clients take longer to come back than an entry takes to
//     commit (many clients each on a connection of its own, whose calls
//     cost the loaded machine more than the commit), the default does not
//     hold: the clients split into two groups whose entries alternate,
//     each about half the clients, so every per-entry cost (an fsync on
//     each node, the AppendEntries, the segment write) is paid over half as
//     many transactions. AggregatorConfig.HoldReturnRatio above 1 holds for
//     them too. It is not the default because the server cannot tell a
//     closed loop from an open one: under open-loop arrivals the return
//     time is about a commit, so a ratio above 1 makes every batch wait
//     about one more commit (docs/BENCHMARKS.md, "One connection per
//     client: where the server CPU goes").
type Aggregator struct {
	raft        Applier
	metrics     *Metrics
	now         func() time.Time
	maxTxns     int
	maxBytes    int
	pipeTxns    int
	maxInflight int
	timeout     time.Duration
	// holdWindow is the convoy hold after a resolution (holdWindow at
	// AggregatorConfig.HoldReturnRatio; tests change it).
	holdWindow func(c *convoy) time.Duration

	intake   chan *pending       // capacity AggregatorConfig.IntakeQueue: the back-pressure bound
	inflight chan *inflightEntry // capacity MaxInflightEntries: run never has more outstanding
	freed    chan resolution     // capacity MaxInflightEntries: one per resolved entry
	stop     chan struct{}
	dead     chan struct{} // closed when run has ended and every entry it sent is answered
	awaiting awaiting      // complete's current wait (abandoned at Close)
	lastTS   int64         // run only
	taken    atomic.Int64  // requests run took from intake (tests wait on it)
	stopOnce sync.Once

	// maxIntakeBytes bounds the bytes waiting in intake
	// (AggregatorConfig.IntakeQueueBytes); intakeBytes counts them (intakebytes.go).
	maxIntakeBytes int64
	intakeBytes    atomic.Int64

	// limits is stamped into every entry (AggregatorConfig.Limits).
	limits *logstorepb.ApplyLimits
	// sent holds the entries in flight for this node's FSM (AggregatorConfig.Sent).
	sent *Sent
}

// AggregatorConfig are the Aggregator's bounds and clock
// (logstore.Config's fields of the same names; all must be set).
type AggregatorConfig struct {
	// Now is the clock for the leader timestamps stamped into entries.
	Now func() time.Time
	// IntakeQueue and IntakeQueueBytes bound the requests waiting in
	// intake, by count and encoded bytes (back-pressure: QUEUE_FULL).
	IntakeQueue      int
	IntakeQueueBytes int64
	// MaxBatchTxns and MaxBatchBytes bound one entry; PipelineMinTxns is
	// the batch that goes out while entries are in flight, up to
	// MaxInflightEntries of them.
	MaxBatchTxns, MaxBatchBytes, PipelineMinTxns, MaxInflightEntries int
	// HoldReturnRatio bounds the convoy hold (see Aggregator): a batch
	// waits for the clients an entry answered only while they come back
	// within HoldReturnRatio × the commit latency (smoothed). 0 means
	// DefaultHoldReturnRatio.
	HoldReturnRatio float64
	// RaftTimeout bounds raft.Apply's enqueue.
	RaftTimeout time.Duration
	// Limits is stamped into every entry (read only).
	Limits *logstorepb.ApplyLimits
	// Sent, if set, receives every entry handed to Raft until its future
	// resolves, for this node's FSM to take instead of decoding (Sent).
	Sent *Sent
}

// NewAggregator returns a started Aggregator handing entries to r.
func NewAggregator(r Applier, cfg AggregatorConfig, m *Metrics) *Aggregator {
	a := buildAggregator(r, cfg, m)
	a.start()
	return a
}

func buildAggregator(r Applier, cfg AggregatorConfig, m *Metrics) *Aggregator {
	ratio := cfg.HoldReturnRatio
	if ratio == 0 {
		ratio = DefaultHoldReturnRatio
	}
	return &Aggregator{
		raft: r, metrics: m, now: cfg.Now,
		maxTxns: cfg.MaxBatchTxns, maxBytes: cfg.MaxBatchBytes, pipeTxns: cfg.PipelineMinTxns,
		maxInflight: cfg.MaxInflightEntries, timeout: cfg.RaftTimeout,
		holdWindow: func(c *convoy) time.Duration { return holdWindow(c, ratio) },
		limits:     cfg.Limits, sent: cfg.Sent,
		intake: make(chan *pending, cfg.IntakeQueue), maxIntakeBytes: cfg.IntakeQueueBytes,
		inflight: make(chan *inflightEntry, cfg.MaxInflightEntries),
		freed:    make(chan resolution, cfg.MaxInflightEntries),
		stop:     make(chan struct{}),
		dead:     make(chan struct{}),
	}
}

func (a *Aggregator) start() {
	ran, completed := make(chan struct{}), make(chan struct{})
	go func() { defer close(ran); a.run() }()
	go func() { defer close(completed); a.complete() }()
	go func() {
		<-ran // only after stop; inflight is closed
		if stuck := a.abandon(); stuck != nil {
			until := time.Now().Add(closeGrace)
			a.finish(stuck, awaitStopped(stuck.future, until))
			for ie := range a.inflight {
				a.finish(ie, awaitStopped(ie.future, until))
			}
		} else {
			<-completed
		}
		a.drain()
		close(a.dead)
	}()
}

// Submit queues cmd (encoded size bytes) and waits for its result. A full
// intake is ErrQueueFull at once. When ctx ends first the request may still
// be applied: the error wraps apierr.ErrUnknownOutcome's meaning through the
// context error.
func (a *Aggregator) Submit(ctx context.Context, cmd *logstorepb.Command, size int) (proto.Message, error) {
	p, err := a.enqueue(cmd, size)
	if err != nil {
		return nil, err
	}
	return a.wait(ctx, p)
}

// enqueue queues cmd without waiting: a full intake is ErrQueueFull at
// once. Requests enqueued by one goroutine reach the intake in that order.
func (a *Aggregator) enqueue(cmd *logstorepb.Command, size int) (*pending, error) {
	p := &pending{cmd: cmd, size: size, done: make(chan fsm.Result, 1)}
	select {
	case <-a.stop:
		return nil, apierr.ErrShuttingDown
	default:
	}
	if !a.reserveIntake(size) {
		return nil, apierr.ErrQueueFull
	}
	select {
	case a.intake <- p:
		a.setIntakeGauges()
		return p, nil
	default:
		a.releaseIntake(size)
		return nil, apierr.ErrQueueFull
	}
}

// wait returns p's result (see Submit for a ctx that ends first).
func (a *Aggregator) wait(ctx context.Context, p *pending) (proto.Message, error) {
	select {
	case r := <-p.done:
		return r.Resp, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-a.dead:
		select {
		case r := <-p.done:
			return r.Resp, r.Err
		default:
			return nil, apierr.ErrShuttingDown
		}
	}
}

// batcher is run's state: the batch being built and what decides when it
// goes out.
type batcher struct {
	batch       []*pending
	bytes       int
	outstanding int
	// target is how many commands the batch waits for while nothing is in
	// flight (the convoy hold): what it held when entries resolved plus the
	// requests they answered. run takes every resolution waiting in freed
	// before it takes a request from intake, and complete reports a
	// resolution before it answers, so a returning client is never counted
	// twice.
	target    int
	holdUntil time.Time // end of the hold window after the last resolution
	convoy    convoy
}

// ready reports whether the batch goes out now, and otherwise how long the
// convoy hold may still wait (0: no hold, wait for intake or a resolution).
// It reads the clock only for the hold (run loops once per request and per
// resolution, and the clock is a measurable share of a lone Append's CPU).
func (a *Aggregator) ready(b *batcher) (bool, time.Duration) {
	if len(b.batch) == 0 {
		return false, 0
	}
	full := len(b.batch) >= a.maxTxns || b.bytes >= a.maxBytes
	if b.outstanding > 0 {
		big := len(b.batch) >= a.pipeTxns || b.bytes >= a.maxBytes/4
		return (full || big) && b.outstanding < a.maxInflight, 0
	}
	if full || len(b.batch) >= b.target {
		return true, 0
	}
	wait := time.Until(b.holdUntil)
	return wait <= 0, max(wait, 0)
}

// takeResolutions handles every resolution already reported.
func (a *Aggregator) takeResolutions(b *batcher) {
	for {
		select {
		case r := <-a.freed:
			a.resolved(b, r, time.Now())
		default:
			return
		}
	}
}

// resolved updates the convoy hold after an entry resolved at now.
func (a *Aggregator) resolved(b *batcher, r resolution, now time.Time) {
	b.outstanding--
	a.metrics.inflightEntries.Set(float64(b.outstanding))
	if r.cmds == 0 {
		return
	}
	b.target = min(max(b.target, len(b.batch))+r.cmds, a.maxTxns)
	b.convoy.resolved(r.cmds, r.commit, now)
	b.holdUntil = now.Add(a.holdWindow(&b.convoy))
}

func (a *Aggregator) run() {
	defer close(a.inflight)
	var b batcher
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	var holdC <-chan time.Time // non-nil while hold is armed
	for {
		send, wait := a.ready(&b)
		if send {
			a.send(b.batch)
			b.batch, b.bytes, b.target = nil, 0, 0
			b.outstanding++
			a.metrics.inflightEntries.Set(float64(b.outstanding))
			if holdC != nil {
				hold.Stop()
				holdC = nil
			}
			continue
		}
		if wait > 0 && holdC == nil {
			hold.Reset(wait)
			holdC = hold.C
		}
		intake := a.intake
		if len(b.batch) >= a.maxTxns || b.bytes >= a.maxBytes {
			intake = nil // full: wait for an entry to resolve
		}
		select {
		case p := <-intake:
			a.takeResolutions(&b) // before p, which may be a client one answered
			n, took := len(b.batch), b.bytes
			b.batch, b.bytes = append(b.batch, p), b.bytes+p.size
		fill:
			for len(b.batch) < a.maxTxns && b.bytes < a.maxBytes {
				select {
				case p := <-a.intake:
					b.batch, b.bytes = append(b.batch, p), b.bytes+p.size
				default:
					break fill
				}
			}
			if b.convoy.timing { // arrived reads now only then
				b.convoy.arrived(len(b.batch)-n, time.Now())
			}
			a.taken.Add(int64(len(b.batch) - n))
			a.releaseIntake(b.bytes - took)
		case r := <-a.freed:
			a.resolved(&b, r, time.Now())
		case <-holdC:
			holdC = nil
		case <-a.stop:
			for _, p := range b.batch {
				p.done <- fsm.Result{Err: apierr.ErrShuttingDown}
			}
			return
		}
	}
}

// send hands one entry of batch to Raft.
func (a *Aggregator) send(batch []*pending) {
	ts := max(a.now().UnixNano(), a.lastTS)
	a.lastTS = ts
	e := &logstorepb.Entry{TimestampUnixNano: ts, Limits: a.limits, Commands: make([]*logstorepb.Command, len(batch))}
	for i, p := range batch {
		e.Commands[i] = p.cmd
	}
	data, err := proto.Marshal(e)
	if err != nil {
		panic("logstore: marshal entry: " + err.Error()) // validated protos always marshal
	}
	a.metrics.batchTxns.Observe(float64(len(batch)))
	a.metrics.batchBytes.Observe(float64(len(data)))
	if a.sent != nil {
		a.sent.Put(data, e) // before Apply: the FSM may apply it before Apply returns
	}
	a.inflight <- &inflightEntry{future: a.raft.Apply(data, a.timeout), data: data, batch: batch, start: time.Now()}
}

// complete answers the entries run hands to Raft, in order. It waits on
// each future itself, with no goroutine of its own per entry: a wait that
// Close finds still blocked is abandoned (see abandon).
func (a *Aggregator) complete() {
	var until time.Time // closeGrace's end, from the first entry after Close
	for ie := range a.inflight {
		if !a.awaiting.begin(ie) {
			if until.IsZero() {
				until = time.Now().Add(closeGrace)
			}
			a.finish(ie, awaitStopped(ie.future, until))
			continue
		}
		err := ie.future.Error()
		if !a.awaiting.end(ie) {
			return // abandoned: Close answered ie and answers what follows
		}
		a.finish(ie, err)
	}
}

// finish answers ie's requests after its future resolved with err.
func (a *Aggregator) finish(ie *inflightEntry, err error) {
	if a.sent != nil {
		a.sent.Drop(ie.data) // taken by the FSM unless the entry failed
	}
	if err != nil {
		a.freed <- resolution{} // refused requests are not expected back soon
		err = raftErr(err)
		for _, p := range ie.batch {
			p.done <- fsm.Result{Err: err}
		}
		return
	}
	commit := time.Since(ie.start)
	a.freed <- resolution{cmds: len(ie.batch), commit: commit}
	a.metrics.commitDuration.Observe(commit.Seconds())
	res, ok := ie.future.Response().([]fsm.Result)
	if !ok || len(res) != len(ie.batch) {
		panic("logstore: apply result does not match the entry's commands")
	}
	for i, p := range ie.batch {
		r := res[i]
		if r.Err != nil {
			// The FSM refuses a command with no effect on any replica
			// (fsm/apply.go): whatever the code, nothing was written.
			r.Err = apierr.WithApplied(r.Err, apierr.AppliedNo)
		}
		p.done <- r
	}
}

// awaiting is the entry complete waits on, shared with the goroutine that
// ends the Aggregator. hashicorp/raft never resolves a future left in its
// buffered apply channel (BatchApplyCh) or its FSM channel at shutdown, so
// once run has ended (Raft is shut down by then: Close's contract) a wait
// still blocked may never end; abandon then takes the entry over and the
// goroutine that ends the Aggregator answers it and the rest itself (each
// with its result if its future resolves within closeGrace, else as
// unknown), and complete, should its future resolve after all, drops it.
// So Close never hangs, and the one goroutine that can stay blocked is
// complete (once).
type awaiting struct {
	mu        sync.Mutex
	cur       *inflightEntry // the entry complete waits on; nil between entries
	abandoned bool
}

// begin records that complete waits on ie; false once abandoned.
func (w *awaiting) begin(ie *inflightEntry) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.abandoned {
		return false
	}
	w.cur = ie
	return true
}

// end reports whether ie, whose future resolved, is still complete's to
// answer (false: abandon took it).
func (w *awaiting) end(ie *inflightEntry) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur != ie {
		return false
	}
	w.cur = nil
	return true
}

// abandon stops complete's waits, after run ended: it returns the entry
// complete is blocked on (its caller answers it and every entry after it),
// or nil when complete waits on none (it finishes the rest itself, each
// wait bounded by awaitStopped).
func (a *Aggregator) abandon() *inflightEntry {
	w := &a.awaiting
	w.mu.Lock()
	defer w.mu.Unlock()
	w.abandoned = true
	stuck := w.cur
	w.cur = nil
	return stuck
}

// closeGrace is how long in all, once the Aggregator is closed (Raft is
// shut down by then), the entries still in flight may take to resolve
// before the rest are answered as unknown outcomes: a resolved future
// answers at once, one Raft dropped never does.
const closeGrace = 100 * time.Millisecond

// awaitStopped is f.Error() once the Aggregator is closed: the future's
// error if it resolves by until (a resolved future's at once, even after
// until), or raft.ErrRaftShutdown (the entry's outcome is unknown). The
// goroutine waiting on an unresolved future stays blocked (at Close only,
// at most MaxInflightEntries). Test:
// aggregator_test.go:TestAggregatorCloseAnswersResolvedFutures.
func awaitStopped(f raft.ApplyFuture, until time.Time) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(max(time.Until(until), time.Millisecond))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return raft.ErrRaftShutdown
	}
}

// drain answers what is left in intake after the goroutines ended.
func (a *Aggregator) drain() {
	for {
		select {
		case p := <-a.intake:
			a.releaseIntake(p.size)
			p.done <- fsm.Result{Err: apierr.ErrShuttingDown}
		default:
			return
		}
	}
}

// Close stops the goroutines; Raft must be shut down first so in-flight
// futures resolve. It waits for them to end.
func (a *Aggregator) Close() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.dead
}
