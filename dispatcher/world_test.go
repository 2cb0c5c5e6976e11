package dispatcher

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// This file is the closed world shared by the conformance test (every
// interleaving, small bounds) and the randomized simulation (random
// interleavings, bigger bounds): the REAL Dispatcher and targetqueue, driven
// by the actions of the engine around them and of the targets, as in the
// paper's PlusCal model and tla/LogPlayer.tla:
//
//	dispatch  main fetcher: Dispatch the next LSN; slow targets lose their stream
//	fetch     one step of a recovery fetcher (PushCatchup, or FetchingCompleted
//	          after its range); stale fetchers of older terms keep running
//	          until the dispatcher tells them to stop
//	send      a target's sender: while its stream's window has room (fewer
//	          than window batches unacked, as logplayer's conn counts them),
//	          NextBatchForTerm onto its in-order wire
//	apply     the target applies the wire's front batch and persists its
//	          applied LSN in the same local transaction (the SDK's group
//	          commit); its cumulative ack is pending
//	ack       the pending ack reaches AckTerm with its stream's term (an ack
//	          of an older stream is refused as stale, as the engine does);
//	          accepted, it releases the acked batches from the window
//	progress  the progress ticker: Progress
//	bogus     (failure) a faulty target acks the log's last LSN, above
//	          anything sent to it in this term: AckTerm must refuse it
//	          (ErrBogusAck) and the engine ends the stream, as on a crash
//	crash     (failure) the target crashes or its stream breaks: wire and
//	          pending ack lost, Suspend
//	return    the target's handshake: Return(durable applied); a recovery
//	          fetcher starts unless the range is empty
//	restart   (failure) the LogPlayer crashes: dispatcher, queues and
//	          fetchers gone; a new one starts from min(durable applied) and
//	          every target must hand-shake again. Wires already on their
//	          way stay deliverable until the target's next handshake
//	          (epoch fencing drops the rest)
//
// Safety is checked at every apply; liveness when nothing can happen any more.

// model is the immutable description of one world: the log, the targets and
// the bounds.
type model struct {
	log         []*logstorepb.Transaction // log[i].Lsn == i+1
	ids         []string
	topics      []map[string]bool
	queue       targetqueue.Config
	batch       int   // messages per batch
	batchBytes  int64 // bytes per batch
	window      int   // batches in flight per target (logplayer WindowBatches)
	maxFailures int   // crashes + restarts
	mutate      mutations
	// next[t][a] is the lowest LSN > a carrying a slice for target t (0: none).
	next [][]types.LSN
}

func newModel(log []*logstorepb.Transaction, ids []string, topics [][]string) *model {
	m := &model{log: log, ids: ids, batch: 2, batchBytes: 1 << 20, window: 2, queue: targetqueue.Config{MaxCount: 2}}
	for t := range ids {
		set := map[string]bool{}
		for _, topic := range topics[t] {
			set[topic] = true
		}
		m.topics = append(m.topics, set)
		next := make([]types.LSN, len(log)+1)
		var n types.LSN
		for a := len(log); a >= 0; a-- {
			next[a] = n
			if a > 0 && m.wants(t, log[a-1]) {
				n = types.LSN(a)
			}
		}
		m.next = append(m.next, next)
	}
	return m
}

// nextFor is the recovery fetcher's next LSN after lsn: the LogStore's
// topic-filtered read skips transactions with none of t's topics. Beyond to
// it is to+1 (the range is exhausted).
func (m *model) nextFor(t int, lsn, to types.LSN) types.LSN {
	if n := m.next[t][min(lsn, types.LSN(len(m.log)))]; n != 0 && n <= to {
		return n
	}
	return to + 1
}

func (m *model) wants(t int, txn *logstorepb.Transaction) bool {
	for _, s := range txn.Slices {
		if m.topics[t][s.Topic] {
			return true
		}
	}
	return false
}

func (m *model) newDispatcher(start types.LSN) *Dispatcher {
	d := New(Config{Queue: m.queue}, start)
	d.mutate = m.mutate
	for t, id := range m.ids {
		var topics []string
		for topic := range m.topics[t] {
			topics = append(topics, topic)
		}
		if err := d.AddTarget(id, topics); err != nil {
			panic(err)
		}
	}
	return d
}

// testMutations each disable one safety mechanism of the real code; the
// conformance test and the simulation must catch every one.
var testMutations = []struct {
	name   string
	mutate mutations
}{
	{"no-target-terms", mutations{ignoreTerm: true}},
	{"no-last-ack-filter", mutations{ignoreLastAck: true}},
	{"no-bogus-ack-check", mutations{ignoreBogusAck: true}},
	{"recovery-end-behind", mutations{recoveryEndBehind: true}},
}

type actionKind uint8

const (
	actDispatch actionKind = iota
	actFetch
	actSend
	actApply
	actAck
	actProgress
	actCrash
	actReturn
	actRestart
	actBogus
)

var actionNames = [...]string{"dispatch", "fetch", "send", "apply", "ack", "progress", "crash", "return", "restart", "bogus"}

// action is one step; i is a target index, or a fetcher index for actFetch.
type action struct {
	kind actionKind
	i    int
}

// targetOf is the target an action belongs to (-1: none, the main fetcher
// and a LogPlayer restart).
func (w *world) targetOf(a action) int {
	switch a.kind {
	case actDispatch, actRestart:
		return -1
	case actFetch:
		return w.fetchers[a.i].target
	}
	return a.i
}

func (a action) fault() bool {
	return a.kind == actCrash || a.kind == actRestart || a.kind == actBogus
}

// fetcher is a recovery fetcher: it pushes its target's transactions in
// next..to, then completes.
type fetcher struct {
	target   int
	term     types.Term
	next, to types.LSN
}

// tstate is one target: its durable state and its current stream.
type tstate struct {
	applied types.LSN           // durable applied LSN
	history []types.LSN         // data LSNs applied, in order (simulation only)
	up      bool                // a stream of term is open
	term    types.Term          // term of the open stream
	wire    [][]targetqueue.Msg // batches sent on the stream of term, not yet applied
	// window is the stream's in-flight window as logplayer's conn keeps
	// it: the last LSN of each batch sent on the stream of term and not
	// yet wholly acked.
	window  []types.LSN
	ack     types.LSN  // pending cumulative ack (valid if hasAck)
	ackTerm types.Term // the term of the stream that carries it
	hasAck  bool
	bogus   bool // the pending ack is a faulty target's lie
}

type world struct {
	m        *model
	d        *Dispatcher
	fetchers []fetcher
	targets  []tstate
	failures int
	// keepHistory records every applied LSN (the simulation compares it
	// with the oracle); the conformance test checks order at each apply.
	keepHistory bool
	// tracing makes step describe what it did in trace (for reports only:
	// formatting costs more than the step).
	tracing bool
	trace   []string
	// counts says what happened (the simulation checks its coverage).
	counts worldCounts
}

type worldCounts struct {
	slow, staleDrops, catchupFull, progress, crashes, restarts, recoveries, lateApplies, bogusAcks int
}

func (w *world) note(format string, args ...any) {
	if w.tracing {
		w.trace = append(w.trace, fmt.Sprintf(format, args...))
	}
}

func newWorld(m *model) *world {
	w := &world{m: m, d: m.newDispatcher(0), targets: make([]tstate, len(m.ids))}
	return w
}

func (w *world) lastLSN() types.LSN { return types.LSN(len(w.m.log)) }

// actions appends the actions whose cheap preconditions hold. Some may still
// turn out to be no-ops (a full catchup queue, nothing to send).
func (w *world) actions(buf []action, faults bool) []action {
	if w.d.CurrentLSN() < w.lastLSN() {
		buf = append(buf, action{kind: actDispatch})
	}
	for i := range w.fetchers {
		buf = append(buf, action{actFetch, i})
	}
	for t := range w.targets {
		ts := &w.targets[t]
		id := w.m.ids[t]
		if ts.up && len(ts.window) < w.m.window && w.d.hasFront(id) {
			buf = append(buf, action{actSend, t})
		}
		if len(ts.wire) > 0 {
			buf = append(buf, action{actApply, t})
		}
		if ts.hasAck {
			buf = append(buf, action{actAck, t})
		}
		if ts.up && w.d.progressDue(id) {
			buf = append(buf, action{actProgress, t})
		}
		if !ts.up {
			buf = append(buf, action{actReturn, t})
		}
		if faults && ts.up && w.failures < w.m.maxFailures {
			buf = append(buf, action{actCrash, t})
			if w.d.bogusAckPossible(id, w.lastLSN()) {
				buf = append(buf, action{actBogus, t})
			}
		}
	}
	if faults && w.failures < w.m.maxFailures {
		buf = append(buf, action{kind: actRestart})
	}
	return buf
}

// violation is a broken safety or liveness property, or a panic of the real
// code (its own assertions).
type violation struct {
	kind string // "safety", "liveness", "panic"
	msg  string
}

func (v *violation) Error() string { return v.kind + ": " + v.msg }

// step performs a and returns a violation if it found one.
func (w *world) step(a action) (v *violation) {
	defer func() {
		if r := recover(); r != nil {
			v = &violation{kind: "panic", msg: fmt.Sprint(r)}
		}
	}()
	m := w.m
	switch a.kind {
	case actDispatch:
		lsn := w.d.CurrentLSN() + 1
		_, slow := w.d.Dispatch(m.log[lsn-1], 0)
		for _, id := range slow {
			t := slices.Index(m.ids, id)
			w.disconnect(t, false)
			w.counts.slow++
		}
		w.note("dispatch %d slow=%v", lsn, slow)
		return nil
	case actFetch:
		f := &w.fetchers[a.i]
		id := m.ids[f.target]
		if f.next > f.to {
			ok := w.d.FetchingCompleted(id, f.term)
			w.note("fetchingCompleted %s term=%d: %t", id, f.term, ok)
			w.fetchers = slices.Delete(w.fetchers, a.i, a.i+1)
			return nil
		}
		// PushCatchup has no last-ack filter: the next catchup LSN of the
		// current term must be above the last ack (LogPlayer.tla:
		// CatchupAboveAck).
		if s, _ := w.d.Stats(id); s.Term == f.term && s.State == targetqueue.RecoveryFetching && s.LastAck >= f.next {
			return &violation{"safety", fmt.Sprintf("catchup push of LSN %d to %s at or below its last ack %d", f.next, id, s.LastAck)}
		}
		res := w.d.PushCatchup(id, f.term, m.log[f.next-1], 0)
		w.note("pushCatchup %s term=%d lsn=%d: %s", id, f.term, f.next, res)
		switch res {
		case targetqueue.Pushed:
			f.next = w.m.nextFor(f.target, f.next, f.to)
		case targetqueue.Overflow:
			w.counts.catchupFull++
		case targetqueue.DroppedStale:
			w.counts.staleDrops++
			w.fetchers = slices.Delete(w.fetchers, a.i, a.i+1)
		default: // the fetcher learns it is stale or its target is down: it stops
			w.fetchers = slices.Delete(w.fetchers, a.i, a.i+1)
		}
		return nil
	case actSend:
		ts := &w.targets[a.i]
		msgs, ok := w.d.NextBatchForTerm(m.ids[a.i], ts.term, m.batch, m.batchBytes)
		if !ok {
			return &violation{"safety", fmt.Sprintf("sender of %s has term %d, dispatcher disagrees", m.ids[a.i], ts.term)}
		}
		if len(msgs) > 0 {
			ts.wire = append(ts.wire, msgs)
			ts.window = append(ts.window, msgs[len(msgs)-1].LSN)
		}
		w.note("send %s term=%d %s", m.ids[a.i], ts.term, targetqueue.AppendLSNs(nil, msgs))
		return nil
	case actApply:
		return w.apply(a.i)
	case actAck:
		ts := &w.targets[a.i]
		ts.hasAck = false
		err := w.d.AckTerm(m.ids[a.i], ts.ackTerm, ts.ack)
		switch {
		case err == nil, errors.Is(err, ErrStaleTerm):
		case errors.Is(err, ErrBogusAck) && ts.bogus:
			// runner.receive cancels the conn: the session ends.
			if ts.up && ts.ackTerm == ts.term {
				w.disconnect(a.i, false)
				w.d.Suspend(m.ids[a.i])
			}
		default:
			return &violation{"safety", fmt.Sprintf("ack refused: %v", err)}
		}
		if err == nil && ts.up && ts.ackTerm == ts.term {
			// conn.ack: the batches wholly covered by the cumulative ack.
			n := 0
			for n < len(ts.window) && ts.window[n] <= ts.ack {
				n++
			}
			ts.window = ts.window[n:]
		}
		w.note("ack %s %d term=%d: %v", m.ids[a.i], ts.ack, ts.ackTerm, err)
		return nil
	case actProgress:
		ok := w.d.Progress(m.ids[a.i], 0)
		if ok {
			w.counts.progress++
		}
		w.note("progress %s: %t", m.ids[a.i], ok)
		return nil
	case actCrash:
		w.failures++
		w.counts.crashes++
		w.disconnect(a.i, true)
		w.d.Suspend(m.ids[a.i])
		w.note("crash %s", m.ids[a.i])
		return nil
	case actReturn:
		ts := &w.targets[a.i]
		ts.wire = nil // the handshake fences whatever an older stream still carries
		r, err := w.d.Return(m.ids[a.i], ts.applied)
		if err != nil {
			return &violation{"panic", err.Error()}
		}
		ts.up, ts.term, ts.window = true, r.Term, nil // a new conn, an empty window
		if !r.Empty {
			w.counts.recoveries++
			w.fetchers = append(w.fetchers, fetcher{target: a.i, term: r.Term, next: m.nextFor(a.i, r.From, r.To), to: r.To})
		}
		w.note("return %s applied=%d: term=%d range=(%d,%d] empty=%t", m.ids[a.i], ts.applied, r.Term, r.From, r.To, r.Empty)
		return nil
	case actBogus:
		w.failures++
		w.counts.bogusAcks++
		ts := &w.targets[a.i]
		ts.ack, ts.ackTerm, ts.hasAck, ts.bogus = w.lastLSN(), ts.term, true, true
		w.note("bogus ack %s %d term=%d", m.ids[a.i], ts.ack, ts.term)
		return nil
	case actRestart:
		w.failures++
		w.counts.restarts++
		start := w.targets[0].applied
		for t := range w.targets {
			start = min(start, w.targets[t].applied)
			w.disconnect(t, false)
			w.targets[t].hasAck = false // the old receivers died with the process
		}
		w.d = m.newDispatcher(start)
		w.fetchers = nil
		w.note("restart from %d", start)
		return nil
	}
	panic("unknown action")
}

// disconnect closes target t's stream. A crash of the target or of the
// LogPlayer also loses what was on the wire and the pending ack; when the
// LogPlayer closes a slow target's stream, the target may still apply what
// it received until its next handshake, and the old stream's late ack is
// refused as stale.
func (w *world) disconnect(t int, crash bool) {
	ts := &w.targets[t]
	ts.up = false
	if crash {
		ts.wire, ts.hasAck = nil, false
	}
}

// apply is the target: it applies the front batch in one local transaction
// with its applied LSN, and queues a cumulative ack.
func (w *world) apply(t int) *violation {
	ts := &w.targets[t]
	batch := ts.wire[0]
	ts.wire = ts.wire[1:]
	if !ts.up {
		w.counts.lateApplies++ // from a stream the LogPlayer already closed
	}
	for _, msg := range batch {
		if v := w.applyMsg(t, msg); v != nil {
			return v
		}
	}
	ts.ack, ts.ackTerm, ts.hasAck, ts.bogus = ts.applied, ts.term, true, false
	w.note("apply %s %s", w.m.ids[t], targetqueue.AppendLSNs(nil, batch))
	return nil
}

// applyMsg checks that msg is exactly the next message t must apply (or a
// progress marker that skips none) and applies it.
func (w *world) applyMsg(t int, msg targetqueue.Msg) *violation {
	m, ts := w.m, &w.targets[t]
	id := m.ids[t]
	if msg.LSN <= ts.applied {
		return &violation{"safety", fmt.Sprintf("%s: LSN %d applied again or out of order (applied %d)", id, msg.LSN, ts.applied)}
	}
	if msg.LSN > w.lastLSN() {
		return &violation{"safety", fmt.Sprintf("%s: LSN %d beyond the log (%d)", id, msg.LSN, w.lastLSN())}
	}
	next := m.next[t][ts.applied]
	if msg.IsProgress() {
		if next != 0 && next <= msg.LSN {
			return &violation{"safety", fmt.Sprintf("%s: progress marker %d skips LSN %d (applied %d)", id, msg.LSN, next, ts.applied)}
		}
	} else {
		if msg.LSN != next {
			return &violation{"safety", fmt.Sprintf("%s: got LSN %d, next for its topics after %d is %d", id, msg.LSN, ts.applied, next)}
		}
		var want []*logstorepb.TxnSlice
		for _, s := range m.log[msg.LSN-1].Slices {
			if m.topics[t][s.Topic] {
				want = append(want, s)
			}
		}
		if !slices.Equal(want, msg.Slices) {
			return &violation{"safety", fmt.Sprintf("%s: LSN %d carries the wrong slices", id, msg.LSN)}
		}
		if w.keepHistory {
			ts.history = append(ts.history, msg.LSN)
		}
	}
	ts.applied = msg.LSN
	return nil
}

// liveness is checked when nothing more can happen: every target has applied
// every message for its topics, and everything is drained.
func (w *world) liveness() *violation {
	var problems []string
	for t, ts := range w.targets {
		id := w.m.ids[t]
		if n := w.m.next[t][ts.applied]; n != 0 {
			problems = append(problems, fmt.Sprintf("%s applied %d, missing LSN %d", id, ts.applied, n))
		}
		s, _ := w.d.Stats(id)
		if !ts.up || s.State != targetqueue.Normal || s.NormalLen+s.CatchupLen+s.InFlight != 0 || s.LastAck != w.lastLSN() {
			problems = append(problems, fmt.Sprintf("%s not drained: up=%t %+v", id, ts.up, s))
		}
	}
	if w.d.CurrentLSN() != w.lastLSN() || len(w.fetchers) != 0 {
		problems = append(problems, fmt.Sprintf("main stream at %d of %d, %d fetchers left", w.d.CurrentLSN(), w.lastLSN(), len(w.fetchers)))
	}
	if problems == nil {
		return nil
	}
	return &violation{"liveness", strings.Join(problems, "; ")}
}

// clone deep-copies the world; the model and the messages are shared
// (immutable).
func (w *world) clone() *world {
	c := *w
	c.d = w.d.clone()
	c.fetchers = slices.Clone(w.fetchers)
	c.targets = slices.Clone(w.targets)
	for t := range c.targets {
		c.targets[t].wire = slices.Clone(c.targets[t].wire) // batches are never modified
		c.targets[t].window = slices.Clone(c.targets[t].window)
		c.targets[t].history = slices.Clone(c.targets[t].history)
	}
	return &c
}

// fingerprint appends to b a canonical description of everything that
// decides the future: the dispatcher (current LSN, and per target the queue,
// last ack and recovery range), the fetchers (as a multiset), the targets and
// the failure budget. Counters, timestamps and histories are left out.
//
// States that behave alike get one description:
//   - terms are compared only for equality with the target's current term,
//     so each is written as current (c) or stale (s) - unless a mutation
//     disables the term checks, when exact terms matter;
//   - a stale fetcher only ever stops at its next step, so its position is
//     left out; a stale pending ack is refused, so it is left out;
//   - the recovery range matters only in RF, the connection term only while
//     connected;
//   - the queue's ordering watermarks (targetqueue "last=") are left out:
//     they only feed assertions, and what they guard (no LSN pushed or sent
//     twice or backwards within a term) the target's own check at apply
//     catches on the same queues and wires.
func (w *world) fingerprint(b []byte) []byte {
	exact := w.m.mutate != (mutations{})
	var terms [8]types.Term
	cur := w.d.appendFingerprint(b[:0:0], exact, terms[:0])
	b = append(b, cur.fp...)
	rel := func(t int, term types.Term) byte {
		switch {
		case exact:
			return byte('0' + term)
		case term == cur.terms[t]:
			return 'c'
		}
		return 's'
	}
	fs := w.fetchers
	if len(fs) > 1 {
		fs = slices.Clone(fs)
		slices.SortFunc(fs, func(x, y fetcher) int {
			return cmp.Or(cmp.Compare(x.target, y.target), cmp.Compare(rel(x.target, x.term), rel(y.target, y.term)), cmp.Compare(x.next, y.next))
		})
	}
	for _, f := range fs {
		b = append(b, "|f"...)
		b = strconv.AppendInt(b, int64(f.target), 10)
		r := rel(f.target, f.term)
		b = append(b, r)
		if r != 's' {
			b = appendUints(b, f.next, f.to)
		}
	}
	for t, ts := range w.targets {
		b = append(b, "|t"...)
		b = strconv.AppendUint(b, uint64(ts.applied), 10)
		if ts.up {
			b = append(b, 'u', rel(t, ts.term), 'w')
			b = appendUints(b, ts.window...)
		}
		for _, batch := range ts.wire {
			b = targetqueue.AppendLSNs(b, batch)
		}
		if r := rel(t, ts.ackTerm); ts.hasAck && r != 's' {
			b = append(b, 'a', r)
			b = strconv.AppendUint(b, uint64(ts.ack), 10)
			if ts.bogus {
				b = append(b, 'b')
			}
		}
	}
	b = append(b, "|F"...)
	return strconv.AppendInt(b, int64(w.failures), 10)
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func appendUints[T ~uint64](b []byte, vs ...T) []byte {
	for i, v := range vs {
		if i > 0 {
			b = append(b, ':')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return b
}

// clone deep-copies a dispatcher (test only).
func (d *Dispatcher) clone() *Dispatcher {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := &Dispatcher{cfg: d.cfg, log: d.log, mutate: d.mutate}
	c.mu.currentLSN = d.mu.currentLSN
	c.mu.lastTimestamp = d.mu.lastTimestamp
	c.mu.targets = make(map[string]*target, len(d.mu.targets))
	c.mu.order = make([]*target, len(d.mu.order))
	ts := make([]target, len(d.mu.order))
	for i, t := range d.mu.order {
		ts[i] = *t
		ts[i].q = t.q.Clone()
		c.mu.targets[t.id] = &ts[i]
		c.mu.order[i] = &ts[i]
	}
	return c
}

type dispatcherFingerprint struct {
	fp    []byte
	terms []types.Term // current term per target, in id order
}

// appendFingerprint describes the dispatcher for world.fingerprint: current
// LSN, and per target last ack, the recovery range in RF, and the queue
// without its term (and, unless exact, without its watermarks).
func (d *Dispatcher) appendFingerprint(b []byte, exact bool, terms []types.Term) dispatcherFingerprint {
	d.mu.Lock()
	defer d.mu.Unlock()
	b = strconv.AppendUint(b, uint64(d.mu.currentLSN), 10)
	for _, t := range d.mu.order {
		terms = append(terms, t.q.Term())
		b = append(b, '|')
		b = strconv.AppendUint(b, uint64(t.lastAck), 10)
		if t.q.State() == targetqueue.RecoveryFetching {
			b = append(b, 'r')
			b = appendUints(b, t.recovery.From, t.recovery.To)
		}
		qs := t.q.String()
		if !exact {
			qs = qs[strings.IndexByte(qs, ' '):strings.LastIndex(qs, " last=")]
		}
		b = append(b, qs...)
	}
	return dispatcherFingerprint{fp: b, terms: terms}
}

// bogusAckPossible: an ack of lsn would be above both the target's last ack
// and everything sent to it in this term (AckTerm's ErrBogusAck).
func (d *Dispatcher) bogusAckPossible(id string, lsn types.LSN) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.mu.targets[id]
	return lsn > t.lastAck && lsn > t.q.LastSent()
}

// hasFront: the target's queue has something to send.
func (d *Dispatcher) hasFront(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.mu.targets[id].q.Front()
	return ok
}

func (d *Dispatcher) progressDue(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.progressDueLocked(d.mu.targets[id], 0) // the world's Progress calls pass time 0
}
