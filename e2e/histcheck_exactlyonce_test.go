package e2e

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
)

// violationsMax bounds the violations one check lists (the count is
// exact; a broken run would otherwise print one line per message).
const violationsMax = 50

// violations are what a check found wrong: the first violationsMax, and
// how many there were.
type violations struct {
	List  []string
	Count int
}

func (v *violations) add(format string, args ...any) {
	v.Count++
	if len(v.List) < violationsMax {
		v.List = append(v.List, fmt.Sprintf(format, args...))
	}
}

// OK reports whether nothing was found.
func (v violations) OK() bool { return v.Count == 0 }

// histAck is an acknowledged Append: its transaction id and the LSN it was
// acknowledged with.
type histAck struct {
	ID  string
	LSN uint64
}

// logIDs returns the id of each transaction of the log read back (the whole
// log from LSN 1): logIDs(log, id)[i] names LSN i+1. It panics on an LSN gap,
// which the reader must have refused.
func logIDs(log []*logstorepb.Transaction, id func(*logstorepb.Transaction) string) []string {
	out := make([]string, len(log))
	for i, t := range log {
		if t.Lsn != uint64(i)+1 {
			panic(fmt.Sprintf("histcheck: lsn %d at position %d of the log, want dense LSNs from 1", t.Lsn, i))
		}
		out[i] = id(t)
	}
	return out
}

// ackViolations checks the log read back against the acknowledged Appends:
// every one is in the log exactly once, at its LSN; no LSN is acknowledged
// twice (acks hold one ack per transaction: a producer retry answered as a
// duplicate is the same ack); and no transaction id is in the log twice
// (acknowledged or not: an unacknowledged retry that wrote twice counts).
// ids names the transaction at each LSN of the whole log (ids[i] is LSN
// i+1, as logIDs returns; "" for one the workload did not write, which is not
// counted).
func ackViolations(ids []string, acks []histAck) violations {
	var v violations
	count := map[string]int{}
	for _, id := range ids {
		if id != "" {
			count[id]++
		}
	}
	at := func(lsn uint64) string { return ids[lsn-1] }
	byLSN := map[uint64]string{}
	for _, a := range acks {
		if prev, ok := byLSN[a.LSN]; ok {
			v.add("lsn %d acknowledged twice: to txn %s and to txn %s", a.LSN, prev, a.ID)
		}
		byLSN[a.LSN] = a.ID
		switch {
		case a.LSN == 0 || a.LSN > uint64(len(ids)):
			v.add("txn %s acknowledged at lsn %d, outside the log [1, %d]: lost", a.ID, a.LSN, len(ids))
		case at(a.LSN) != a.ID:
			v.add("txn %s acknowledged at lsn %d, the log has txn %q there", a.ID, a.LSN, at(a.LSN))
		}
		if count[a.ID] == 0 && a.LSN <= uint64(len(ids)) {
			v.add("txn %s acknowledged and not in the log: lost", a.ID)
		}
	}
	for _, tid := range slices.Sorted(maps.Keys(count)) {
		if n := count[tid]; n > 1 {
			v.add("txn %s is %d times in the log", tid, n)
		}
	}
	return v
}

// histTarget is what a check knows of one target at the end of a run.
type histTarget struct {
	ID     string
	Topics []string
	// AppliedLSN is its final durable applied LSN.
	AppliedLSN uint64
	// NextOffsets is its durable next offset per topic (target.State.Topics);
	// nil skips that comparison.
	NextOffsets map[string]uint64
	// Applied lists every delivery it durably applied, in order, across
	// restarts (applyLog.Deliveries); nil when it was not recorded (a
	// target in another process), which skips the per-LSN checks.
	Applied []*targetpb.Delivery
	// State is its final data; nil skips the state comparison.
	State map[string][]byte
}

// applyFunc applies a transaction's slices to a target's model state (the
// reference shard's is shard.ModelApply).
type applyFunc func(state map[string][]byte, topics []string, slices []*logstorepb.TxnSlice) error

// targetViolations checks exactly once at each target against the log read
// back (the whole log from LSN 1, through at least every AppliedLSN):
//   - its applied LSN does not pass the log's end;
//   - when recorded, its applied deliveries have strictly increasing LSNs
//     (none applied twice), each carrying exactly the log's slices of its
//     topics at that LSN, and every transaction of the log with data for
//     its topics up to its applied LSN is among them (none lost);
//   - its durable next offsets are the log's counts of its topics;
//   - its final state equals the log up to its applied LSN replayed for its
//     topics with apply.
func targetViolations(log []*logstorepb.Transaction, apply applyFunc, targets []histTarget) map[string]violations {
	out := map[string]violations{}
	for _, tg := range targets {
		var v violations
		checkTarget(&v, log, apply, tg)
		out[tg.ID] = v
	}
	return out
}

func checkTarget(v *violations, log []*logstorepb.Transaction, apply applyFunc, tg histTarget) {
	if tg.AppliedLSN > uint64(len(log)) {
		v.add("applied lsn %d beyond the log's last lsn %d", tg.AppliedLSN, len(log))
		return
	}
	subscribed := map[string]bool{}
	for _, t := range tg.Topics {
		subscribed[t] = true
	}
	// ofTopics is the log's transaction at lsn cut to the target's topics.
	ofTopics := func(lsn uint64) []*logstorepb.TxnSlice {
		var out []*logstorepb.TxnSlice
		for _, s := range log[lsn-1].Slices {
			if subscribed[s.Topic] {
				out = append(out, s)
			}
		}
		return out
	}
	if tg.Applied != nil {
		checkApplied(v, tg, ofTopics)
	}
	next := map[string]uint64{}
	state := map[string][]byte{}
	for lsn := uint64(1); lsn <= tg.AppliedLSN; lsn++ {
		ss := ofTopics(lsn)
		for _, s := range ss {
			next[s.Topic] = s.FirstOffset + uint64(len(s.Messages))
		}
		if tg.State != nil && len(ss) > 0 {
			if err := apply(state, tg.Topics, ss); err != nil {
				v.add("replaying lsn %d: %v", lsn, err)
				return
			}
		}
	}
	if tg.NextOffsets != nil {
		for _, topic := range tg.Topics {
			if got, want := tg.NextOffsets[topic], next[topic]; got != want {
				v.add("topic %s: durable next offset %d, the log has %d messages through lsn %d", topic, got, want, tg.AppliedLSN)
			}
		}
	}
	if tg.State != nil {
		diffState(v, tg.State, state)
	}
}

// checkApplied checks a target's recorded deliveries against the log.
func checkApplied(v *violations, tg histTarget, ofTopics func(uint64) []*logstorepb.TxnSlice) {
	last := uint64(0)
	seen := map[uint64]bool{}
	for _, d := range tg.Applied {
		switch {
		case seen[d.Lsn]:
			v.add("lsn %d applied twice", d.Lsn)
			continue
		case d.Lsn <= last:
			v.add("lsn %d applied after lsn %d", d.Lsn, last)
		case d.Lsn > tg.AppliedLSN:
			v.add("lsn %d applied, beyond the final applied lsn %d", d.Lsn, tg.AppliedLSN)
			continue
		}
		seen[d.Lsn] = true
		last = max(last, d.Lsn)
		if len(d.Slices) == 0 {
			continue // a progress marker
		}
		want := ofTopics(d.Lsn)
		if !sameDelivery(d.Slices, want) {
			v.add("lsn %d: applied %d slices that differ from the log's %d for its topics", d.Lsn, len(d.Slices), len(want))
		}
	}
	for lsn := uint64(1); lsn <= tg.AppliedLSN; lsn++ {
		if !seen[lsn] && len(ofTopics(lsn)) > 0 {
			v.add("lsn %d has data for its topics and was never applied: lost", lsn)
		}
	}
}

// sameDelivery compares delivered slices with the log's, in order.
func sameDelivery(got, want []*logstorepb.TxnSlice) bool {
	return slices.EqualFunc(got, want, func(a, b *logstorepb.TxnSlice) bool { return proto.Equal(a, b) })
}

// diffState reports how a target's state differs from the replayed one.
func diffState(v *violations, got, want map[string][]byte) {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			v.add("key %q missing (the log leaves %q)", k, want[k])
		case !bytes.Equal(g, want[k]):
			v.add("key %q is %q, the log leaves %q", k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			v.add("key %q is %q, the log leaves no such key", k, got[k])
		}
	}
}

// applyLog records, per target, every delivery applied durably, in order.
// Safe for concurrent use.
type applyLog struct {
	mu struct {
		sync.Mutex
		applied map[string][]*targetpb.Delivery
	}
}

// newApplyLog returns an empty applyLog.
func newApplyLog() *applyLog {
	l := &applyLog{}
	l.mu.applied = map[string][]*targetpb.Delivery{}
	return l
}

// Applied records that target durably applied ds (the Store contract says
// ds are not modified afterwards, so they are kept as given).
func (l *applyLog) Applied(target string, ds []*targetpb.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.applied[target] = append(l.mu.applied[target], ds...)
}

// Deliveries returns what target applied so far (never nil).
func (l *applyLog) Deliveries(target string) []*targetpb.Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*targetpb.Delivery{}, l.mu.applied[target]...)
}

// Store wraps inner so that every Apply that succeeds is recorded in l
// under target, after inner's local transaction committed.
func (l *applyLog) Store(targetID string, inner target.Store) target.Store {
	return &recordingStore{inner: inner, target: targetID, log: l}
}

type recordingStore struct {
	inner  target.Store
	target string
	log    *applyLog
}

func (s *recordingStore) State() (target.State, error) { return s.inner.State() }

func (s *recordingStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	if err := s.inner.Apply(ds, next); err != nil {
		return err
	}
	s.log.Applied(s.target, ds)
	return nil
}
