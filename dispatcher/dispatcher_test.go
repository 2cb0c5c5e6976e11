package dispatcher

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// txn builds a transaction with one one-message slice per topic.
func txn(lsn types.LSN, topics ...string) *logstorepb.Transaction {
	t := &logstorepb.Transaction{Lsn: uint64(lsn), TimestampUnixNano: int64(1000 + lsn)}
	for _, topic := range topics {
		t.Slices = append(t.Slices, &logstorepb.TxnSlice{
			Topic:    topic,
			Messages: []*logstorepb.Message{{Value: []byte(fmt.Sprintf("%s@%d", topic, lsn))}},
		})
	}
	return t
}

func newTest(t *testing.T, cfg targetqueue.Config, start types.LSN, targets map[string][]string) *Dispatcher {
	t.Helper()
	d := New(Config{Queue: cfg}, start)
	for id, topics := range targets {
		if err := d.AddTarget(id, topics); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func mustReturn(t *testing.T, d *Dispatcher, id string, applied types.LSN) Recovery {
	t.Helper()
	r, err := d.Return(id, applied)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func stats(t *testing.T, d *Dispatcher, id string) TargetStats {
	t.Helper()
	s, ok := d.Stats(id)
	if !ok {
		t.Fatalf("no stats for %q", id)
	}
	return s
}

func lsns(msgs []targetqueue.Msg) []types.LSN {
	var out []types.LSN
	for _, m := range msgs {
		out = append(out, m.LSN)
	}
	return out
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one containing %q", want)
		}
		if !strings.Contains(fmt.Sprint(r), want) {
			t.Fatalf("panic %q, want one containing %q", r, want)
		}
	}()
	f()
}

func TestAddRemoveTarget(t *testing.T) {
	d := newTest(t, targetqueue.Config{}, 7, nil)
	if err := d.AddTarget("b", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddTarget("a", []string{"y"}); err != nil {
		t.Fatal(err)
	}
	if err := d.AddTarget("a", []string{"x"}); !errors.Is(err, ErrDuplicateTarget) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := d.AddTarget("c", nil); !errors.Is(err, ErrNoTopics) {
		t.Fatalf("no topics: %v", err)
	}
	if got := d.Targets(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("targets %v", got)
	}
	s := stats(t, d, "a")
	if s.State != targetqueue.Suspended || s.Term != 1 || s.CurrentLSN != 7 {
		t.Fatalf("new target: %+v", s)
	}
	d.RemoveTarget("a")
	d.RemoveTarget("nope")
	if got := d.Targets(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("targets after remove %v", got)
	}
	if _, err := d.Return("a", 0); !errors.Is(err, ErrUnknownTarget) {
		t.Fatalf("return of removed target: %v", err)
	}
	if res := d.PushCatchup("a", 2, txn(8, "y"), 0); res != targetqueue.DroppedStale {
		t.Fatalf("catchup push to removed target: %s", res)
	}
}

func TestDispatchContinuity(t *testing.T) {
	d := newTest(t, targetqueue.Config{}, 10, map[string][]string{"a": {"x"}})
	mustPanic(t, "main stream LSN 12 after current LSN 10 (want 11)", func() { d.Dispatch(txn(12, "x"), 0) })
	mustPanic(t, "main stream LSN 10 after current LSN 10 (want 11)", func() { d.Dispatch(txn(10, "x"), 0) })
	d.Dispatch(txn(11, "x"), 0)
	if d.CurrentLSN() != 11 {
		t.Fatalf("current %d", d.CurrentLSN())
	}
}

// TestDispatchFilters checks topic filtering, the shared slice when a target
// takes every slice, byte accounting, suspended targets and the lastAck skip.
func TestDispatchFilters(t *testing.T) {
	d := newTest(t, targetqueue.Config{}, 0, map[string][]string{"a": {"x"}, "b": {"x", "y"}, "c": {"z"}, "s": {"x"}})
	for _, id := range []string{"a", "b", "c"} {
		if r := mustReturn(t, d, id, 0); !r.Empty {
			t.Fatalf("%s: recovery %+v, want empty", id, r)
		}
	}
	tx := txn(1, "x", "y")
	wake, slow := d.Dispatch(tx, 42)
	if !slices.Equal(wake, []string{"a", "b"}) || slow != nil {
		t.Fatalf("wake %v slow %v", wake, slow)
	}
	a, _ := d.NextBatch("a", 10, 1<<20)
	b, _ := d.NextBatch("b", 10, 1<<20)
	if len(a) != 1 || len(a[0].Slices) != 1 || a[0].Slices[0] != tx.Slices[0] {
		t.Fatalf("a got %+v", a)
	}
	if len(b) != 1 || &b[0].Slices[0] != &tx.Slices[0] {
		t.Fatalf("b should share the transaction's slice of slices: %+v", b)
	}
	if a[0].Bytes != int64(proto.Size(tx.Slices[0])) || b[0].Bytes != int64(proto.Size(tx.Slices[0])+proto.Size(tx.Slices[1])) {
		t.Fatalf("bytes a=%d b=%d", a[0].Bytes, b[0].Bytes)
	}
	if a[0].DispatchedUnixNano != 42 || a[0].TimestampUnixNano != 1001 {
		t.Fatalf("times %+v", a[0])
	}
	// A txn with no subscribed topic wakes nobody; one for c wakes only c.
	if wake, _ := d.Dispatch(txn(2, "w"), 0); wake != nil {
		t.Fatalf("wake %v", wake)
	}
	if wake, _ := d.Dispatch(txn(3, "z"), 0); !slices.Equal(wake, []string{"c"}) {
		t.Fatalf("wake %v", wake)
	}
	// lastAck >= LSN: skipped. b returns claiming 5 applied (it is ahead).
	r := mustReturn(t, d, "b", 5)
	if !r.Empty || r.From != 5 || r.To != 3 {
		t.Fatalf("ahead target recovery %+v", r)
	}
	for l := types.LSN(4); l <= 6; l++ {
		wake, _ := d.Dispatch(txn(l, "y"), 0)
		want := []string(nil)
		if l == 6 {
			want = []string{"b"}
		}
		if !slices.Equal(wake, want) {
			t.Fatalf("lsn %d: wake %v, want %v", l, wake, want)
		}
	}
	if s := stats(t, d, "s"); s.State != targetqueue.Suspended || s.NormalLen != 0 {
		t.Fatalf("suspended target got messages: %+v", s)
	}
}

func TestOverflowSuspendsSlowTarget(t *testing.T) {
	d := newTest(t, targetqueue.Config{MaxCount: 2}, 0, map[string][]string{"a": {"x"}, "b": {"x"}})
	mustReturn(t, d, "a", 0)
	mustReturn(t, d, "b", 0)
	d.Dispatch(txn(1, "x"), 0)
	d.NextBatch("a", 10, 1<<20) // a keeps up, b does not
	d.Dispatch(txn(2, "x"), 0)
	d.NextBatch("a", 10, 1<<20)
	wake, slow := d.Dispatch(txn(3, "x"), 0)
	if !slices.Equal(wake, []string{"a"}) || !slices.Equal(slow, []string{"b"}) {
		t.Fatalf("wake %v slow %v", wake, slow)
	}
	s := stats(t, d, "b")
	if s.State != targetqueue.Suspended || s.NormalLen != 0 || s.SlowSuspends != 1 || s.Suspends != 1 || s.Term != 2 {
		t.Fatalf("slow target: %+v", s)
	}
	// It recovers like any returning target: new term, range from its applied LSN.
	r := mustReturn(t, d, "b", 0)
	if r.Empty || r.From != 0 || r.To != 3 || r.Term != 3 {
		t.Fatalf("recovery %+v", r)
	}
}

func TestReturnAndCatchup(t *testing.T) {
	d := newTest(t, targetqueue.Config{MaxCount: 2}, 0, map[string][]string{"a": {"x"}})
	mustReturn(t, d, "a", 0)
	for l := types.LSN(1); l <= 2; l++ {
		d.Dispatch(txn(l, "x"), 0)
	}
	d.Suspend("a")
	for l := types.LSN(3); l <= 6; l++ {
		d.Dispatch(txn(l, "x", "y"), 0)
	}
	r := mustReturn(t, d, "a", 1)
	if want := (Recovery{Target: "a", Term: 3, From: 1, To: 6}); r != want {
		t.Fatalf("recovery %+v, want %+v", r, want)
	}
	// The main stream goes on into the normal queue while recovery runs.
	d.Dispatch(txn(7, "x"), 0)
	if res := d.PushCatchup("a", 2, txn(2, "x"), 0); res != targetqueue.DroppedStale {
		t.Fatalf("stale fetcher: %s", res)
	}
	mustPanic(t, "catchup LSN 1 for \"a\" outside recovery range (1, 6] of term 3", func() { d.PushCatchup("a", 3, txn(1, "x"), 0) })
	mustPanic(t, "catchup LSN 7 for \"a\" outside recovery range (1, 6] of term 3", func() { d.PushCatchup("a", 3, txn(7, "x"), 0) })
	for _, l := range []types.LSN{2, 3} { // in LSN order (a map's order is random)
		if res := d.PushCatchup("a", 3, txn(l, "x"), 0); res != targetqueue.Pushed {
			t.Fatalf("catchup %d: %s", l, res)
		}
	}
	// Catchup full: Overflow, the target is NOT suspended; a txn without its
	// topics is skipped but reports Pushed.
	if res := d.PushCatchup("a", 3, txn(4, "x"), 0); res != targetqueue.Overflow {
		t.Fatalf("catchup 4: %s", res)
	}
	if s := stats(t, d, "a"); s.State != targetqueue.RecoveryFetching || s.CatchupLen != 2 {
		t.Fatalf("after catchup overflow: %+v", s)
	}
	if res := d.PushCatchup("a", 3, txn(4, "y"), 0); res != targetqueue.Pushed {
		t.Fatalf("catchup 4 (not a's topic): %s", res)
	}
	got, term := d.NextBatch("a", 10, 1<<20)
	if term != 3 || !slices.Equal(lsns(got), []types.LSN{2, 3}) {
		t.Fatalf("batch %v term %d", lsns(got), term)
	}
	if res := d.PushCatchup("a", 3, txn(5, "x"), 0); res != targetqueue.Pushed {
		t.Fatalf("catchup 5: %s", res)
	}
	if d.FetchingCompleted("a", 2) {
		t.Fatal("stale FetchingCompleted accepted")
	}
	if !d.FetchingCompleted("a", 3) || d.FetchingCompleted("a", 3) {
		t.Fatal("FetchingCompleted of the current term must succeed exactly once")
	}
	if _, ok := d.NextBatchForTerm("a", 2, 10, 1<<20); ok {
		t.Fatal("NextBatchForTerm with a stale term took messages")
	}
	got, ok := d.NextBatchForTerm("a", 3, 10, 1<<20)
	if !ok || !slices.Equal(lsns(got), []types.LSN{5, 7}) {
		t.Fatalf("batch %v", lsns(got))
	}
	s := stats(t, d, "a")
	if s.State != targetqueue.Normal || s.InFlight != 4 || s.StaleDrops != 2 || s.Returns != 2 {
		t.Fatalf("after catchup: %+v", s)
	}
	// Suspended during recovery: the fetcher of the current term is told to stop.
	r = mustReturn(t, d, "a", 7)
	if !r.Empty {
		t.Fatalf("caught-up target recovery %+v", r)
	}
	d.Suspend("a")
	if res := d.PushCatchup("a", r.Term, txn(8, "x"), 0); res != targetqueue.DroppedSuspended {
		t.Fatalf("push to suspended: %s", res)
	}
}

func TestAcks(t *testing.T) {
	d := newTest(t, targetqueue.Config{}, 0, map[string][]string{"a": {"x"}, "b": {"x"}})
	mustReturn(t, d, "a", 0)
	mustReturn(t, d, "b", 0)
	for l := types.LSN(1); l <= 4; l++ {
		d.Dispatch(txn(l, "x"), 0)
	}
	d.NextBatch("a", 3, 1<<20)
	if err := d.AckTerm("a", 1, 2); !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("stale ack: %v", err)
	}
	if err := d.AckTerm("a", 2, 4); !errors.Is(err, ErrBogusAck) {
		t.Fatalf("bogus ack: %v", err)
	}
	if err := d.AckTerm("zz", 2, 1); !errors.Is(err, ErrUnknownTarget) {
		t.Fatalf("unknown: %v", err)
	}
	if err := d.AckTerm("a", 2, 2); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, d, "a"); s.LastAck != 2 || s.InFlight != 1 {
		t.Fatalf("after ack 2: %+v", s)
	}
	d.Ack("a", 1) // lower cumulative ack: no-op
	d.Ack("zz", 1)
	if s := stats(t, d, "a"); s.LastAck != 2 || s.InFlight != 1 {
		t.Fatalf("after ack 1: %+v", s)
	}
	if got := d.MinAck(); got != 0 {
		t.Fatalf("min ack %d", got)
	}
	d.Ack("b", 3)
	if got := d.MinAck(); got != 2 {
		t.Fatalf("min ack %d", got)
	}
	// An ack of what was sent before a suspension (the old stream's late
	// ack, same term) is true and accepted; a higher one is bogus.
	d.NextBatch("b", 4, 1<<20)
	d.Suspend("b")
	if err := d.AckTerm("b", 2, 4); err != nil {
		t.Fatalf("late ack after suspend: %v", err)
	}
	if err := d.AckTerm("b", 2, 5); !errors.Is(err, ErrBogusAck) {
		t.Fatalf("bogus ack after suspend: %v", err)
	}
	if got := New(Config{}, 9).MinAck(); got != 9 {
		t.Fatalf("min ack without targets %d", got)
	}
}

func TestProgress(t *testing.T) {
	d := newTest(t, targetqueue.Config{}, 0, map[string][]string{"a": {"x"}})
	if d.Progress("a", 0) {
		t.Fatal("progress to a suspended target")
	}
	mustReturn(t, d, "a", 0)
	if d.Progress("a", 0) {
		t.Fatal("progress when nothing was dispatched")
	}
	d.Dispatch(txn(1, "x"), 0)
	d.Dispatch(txn(2, "y"), 0)
	if d.Progress("a", 0) {
		t.Fatal("progress with a queued message")
	}
	d.NextBatch("a", 10, 1<<20)
	if d.Progress("a", 0) {
		t.Fatal("progress with a message in flight")
	}
	d.Ack("a", 1)
	if !d.Progress("a", 77) || d.Progress("a", 78) {
		t.Fatal("progress must push exactly one marker")
	}
	got, _ := d.NextBatch("a", 10, 1<<20)
	if len(got) != 1 || got[0].LSN != 2 || !got[0].IsProgress() || got[0].DispatchedUnixNano != 77 || got[0].TimestampUnixNano != 1002 {
		t.Fatalf("marker %+v", got)
	}
	d.Ack("a", 2)
	if d.Progress("a", 0) {
		t.Fatal("progress to a caught-up target")
	}
	if s := stats(t, d, "a"); s.ProgressMarkers != 1 || s.LastAck != 2 {
		t.Fatalf("stats %+v", s)
	}
	// In RF no marker (it could overtake the recovery).
	d.Dispatch(txn(3, "y"), 0)
	mustReturn(t, d, "a", 1)
	if d.Progress("a", 0) {
		t.Fatal("progress during recovery")
	}
}

// With ProgressIdle a target that was pushed something recently gets no
// marker: its own deliveries keep its applied LSN recent.
func TestProgressOnlyWhenIdle(t *testing.T) {
	d := New(Config{ProgressIdle: 100}, 0)
	if err := d.AddTarget("a", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	mustReturn(t, d, "a", 0)
	d.Dispatch(txn(1, "x"), 1000)
	d.Dispatch(txn(2, "y"), 1010)
	d.NextBatch("a", 10, 1<<20)
	d.Ack("a", 1)
	if d.Progress("a", 1099) {
		t.Fatal("marker 99ns after a push, idle bound 100")
	}
	if !d.Progress("a", 1100) {
		t.Fatal("no marker after 100ns idle")
	}
	d.NextBatch("a", 10, 1<<20)
	d.Ack("a", 2)
	d.Dispatch(txn(3, "y"), 1150)
	if d.Progress("a", 1199) || !d.Progress("a", 1200) {
		t.Fatal("the marker itself counts as the last push")
	}
}

func TestNewPanicsOnBadConfig(t *testing.T) {
	mustPanic(t, "MaxCount -1", func() { New(Config{Queue: targetqueue.Config{MaxCount: -1}}, 0) })
}
