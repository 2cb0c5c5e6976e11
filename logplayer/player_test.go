package logplayer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// Three shards and a recording target get exactly their topics' slices, in
// order, exactly once, and the LogStore learns their acked LSNs.
func TestDeliversToSubscribers(t *testing.T) {
	store := newFakeStore(t)
	targets := shardsAndRecorder(t, "shard-0", "shard-2")
	w := newWorkload(1, "shard-0", "shard-1", "shard-2")
	for range 100 {
		store.Append(w.next()...) // before the player starts: recovered via the main stream
	}
	pr := startPlayer(t, store, targets, nil)
	for range 400 {
		store.Append(w.next()...)
	}
	waitApplied(t, store, targets...)
	testwait.For(t, testwait.Max, "consumers reported", func() bool {
		c := store.Consumers()
		for _, tt := range targets {
			if c[ConsumerName(tt.id)] != store.Head() {
				return false
			}
		}
		return true
	})
	if pr.p.Epoch() != 1 {
		t.Errorf("epoch %d, want 1", pr.p.Epoch())
	}
	if got := testmetric.Value(t, pr.reg, "logplayer_delivery_duration_seconds", map[string]string{"target": "rec"}); got == 0 {
		t.Error("no delivery durations observed for rec")
	}
	head := float64(store.Head())
	for name, want := range map[string]float64{
		"logplayer_target_state":          0, // N
		"logplayer_target_term":           2, // one return
		"logplayer_target_connected":      1,
		"logplayer_target_last_ack_lsn":   head,
		"logplayer_target_lag_entries":    0,
		"logplayer_target_lag_seconds":    0,
		"logplayer_target_suspends_total": 0,
	} {
		if got := testmetric.Value(t, pr.reg, name, map[string]string{"target": "shard-1"}); got != want {
			t.Errorf("%s{target=shard-1} = %v, want %v", name, got, want)
		}
	}
	if got := testmetric.Value(t, pr.reg, "logplayer_current_lsn", nil); got != head {
		t.Errorf("current lsn %v, want %v", got, head)
	}
	if got := testmetric.Value(t, pr.reg, "logplayer_epoch", nil); got != 1 {
		t.Errorf("epoch gauge %v", got)
	}
	pr.stop(t)
	checkTargets(t, storeLog(store), targets...)
}

// Faults under load: a shard is killed and restarted, the LogStore node
// serving the main stream stops, the player is killed and a new one (new
// epoch) takes over; at the end every target holds exactly the log.
func TestFaultsUnderLoad(t *testing.T) {
	store := newFakeStore(t)
	targets := shardsAndRecorder(t, "shard-1", "shard-2")
	s1 := targets[1]
	w := newWorkload(2, "shard-0", "shard-1", "shard-2")
	pr := startPlayer(t, store, targets, nil)

	load := func(n int) {
		for range n {
			store.Append(w.next()...)
		}
	}
	load(200)
	waitApplied(t, store, s1)

	// A shard dies while traffic continues, and comes back once the main
	// stream has passed what it applied (else, on a loaded machine, the
	// player may not have dispatched the new transactions before the shard
	// returns, and the shard returns level with the main stream: no
	// recovery).
	s1.stop()
	load(200)
	testwait.For(t, testwait.Max, "the main stream past the stopped shard", func() bool {
		return pr.p.CurrentLSN() >= types.LSN(store.Head())
	})
	s1.start()
	load(100)
	waitApplied(t, store, targets...)
	if got := testmetric.Value(t, pr.reg, "logplayer_target_recovery_starts_total", map[string]string{"target": "shard-1"}); got < 1 {
		t.Errorf("shard-1 recoveries = %v, want >= 1", got)
	}

	// The LogStore node serving the main stream stops.
	testwait.For(t, testwait.Max, "a node serving the main stream", func() bool { return store.serving() != nil })
	store.serving().Stop()
	load(200)
	waitApplied(t, store, targets...)

	// The player dies; traffic continues; a new player (new epoch) takes over.
	pr.stop(t)
	load(200)
	pr2 := startPlayer(t, store, targets, nil)
	load(100)
	waitApplied(t, store, targets...)
	if pr2.p.Epoch() <= pr.p.Epoch() {
		t.Errorf("second epoch %d not above first %d", pr2.p.Epoch(), pr.p.Epoch())
	}
	pr2.stop(t)

	checkTargets(t, storeLog(store), targets...)
}

// An old LogPlayer cannot deliver once a newer one connected: its targets
// refuse its epoch and its Run ends with ErrFenced.
func TestOldPlayerIsFenced(t *testing.T) {
	store := newFakeStore(t)
	rec := newMemTarget(t, "rec", "a")
	old := startPlayer(t, store, []*testTarget{rec}, nil)
	store.Append(&logstorepb.Slice{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("1")}}})
	waitApplied(t, store, rec)

	newer := startPlayer(t, store, []*testTarget{rec}, nil)
	select {
	case err := <-old.done:
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("old Run = %v, want ErrFenced", err)
		}
		old.cancel = nil // already returned
		old.p.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("old player still running after a newer one connected")
	}
	store.Append(&logstorepb.Slice{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("2")}}})
	waitApplied(t, store, rec)
	newer.stop(t)
	checkTargets(t, storeLog(store), rec)
	if got := rec.allRefusals()["stale_epoch"]; got < 1 {
		t.Errorf("stale_epoch refusals = %v, want >= 1", got)
	}
}

// A target too slow for its queue bound is suspended and recovers from the
// LogStore; nothing is lost or repeated.
func TestSlowTargetRecovers(t *testing.T) {
	store := newFakeStore(t)
	slow := newMemTarget(t, "slow", "a")
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	slow.mem.BeforeApply = func(ds []*targetpb.Delivery, _ target.State) error {
		if len(ds) > 0 {
			<-release
		}
		return nil
	}
	slow.restart() // BeforeApply is read by the server at start
	fast := newMemTarget(t, "fast", "a")
	pr := startPlayer(t, store, []*testTarget{slow, fast}, func(c *Config) {
		c.Queue = targetqueue.Config{MaxCount: 8}
		c.WindowBatches = 2
		c.MaxBatchCount = 4
	})
	// Both targets in N before the burst: a target still returning would
	// take it through its catchup queue, which waits and never suspends.
	testwait.For(t, testwait.Max, "both targets delivering", func() bool {
		ts := pr.p.Targets()
		return len(ts) == 2 && ts[0].State == "N" && ts[1].State == "N"
	})
	for i := range 300 {
		store.Append(&logstorepb.Slice{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte{byte(i)}}}})
	}
	waitApplied(t, store, fast)
	testwait.For(t, testwait.Max, "slow target suspended", func() bool {
		return testmetric.Value(t, pr.reg, "logplayer_target_slow_suspends_total", map[string]string{"target": "slow"}) >= 1
	})
	once.Do(func() { close(release) })
	waitApplied(t, store, slow)
	pr.stop(t)
	checkTargets(t, storeLog(store), slow, fast)
}

// An idle target gets progress markers: its applied LSN follows the head
// although none of the transactions is for it.
func TestProgressMarkers(t *testing.T) {
	store := newFakeStore(t)
	idle := newMemTarget(t, "idle", "nothing-here")
	busy := newMemTarget(t, "busy", "a")
	pr := startPlayer(t, store, []*testTarget{idle, busy}, nil)
	for range 50 {
		store.Append(&logstorepb.Slice{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
	}
	waitApplied(t, store, busy, idle)
	if got := testmetric.Value(t, pr.reg, "logplayer_target_progress_entries_total", map[string]string{"target": "idle"}); got < 1 {
		t.Errorf("progress entries = %v", got)
	}
	if n := len(idle.mem.Applied()); n == 0 {
		t.Error("idle target applied no progress marker")
	}
	checkTargets(t, storeLog(store), idle, busy)
}

// Targets added at runtime start from their own applied LSN; removed ones
// stop receiving and leave the retention floor.
func TestAddRemoveTargets(t *testing.T) {
	store := newFakeStore(t)
	a := newMemTarget(t, "a", "t")
	pr := startPlayer(t, store, []*testTarget{a}, nil)
	for range 50 {
		store.Append(&logstorepb.Slice{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
	}
	b := newMemTarget(t, "b", "t")
	if err := pr.p.AddTarget(context.Background(), b.config()); err != nil {
		t.Fatal(err)
	}
	if err := pr.p.AddTarget(context.Background(), b.config()); !errors.Is(err, ErrDuplicateTarget) {
		t.Fatalf("second add: %v", err)
	}
	if err := pr.p.AddTarget(context.Background(), TargetConfig{ID: "c", Address: "nowhere", Topics: []string{"t"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad address: %v", err)
	}
	waitApplied(t, store, a, b)
	testwait.For(t, testwait.Max, "b reported", func() bool { return store.Consumers()[ConsumerName("b")] == store.Head() })
	if err := pr.p.RemoveTarget(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := pr.p.RemoveTarget(context.Background(), "a"); !errors.Is(err, ErrUnknownTarget) {
		t.Fatalf("second remove: %v", err)
	}
	testwait.For(t, testwait.Max, "the removed target to leave the retention floor", func() bool {
		_, ok := store.Consumers()[ConsumerName("a")]
		return !ok
	})
	aApplied := a.applied()
	for range 20 {
		store.Append(&logstorepb.Slice{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte("y")}}})
	}
	waitApplied(t, store, b)
	if got := a.applied(); got != aApplied {
		t.Errorf("removed target applied %d after removal (was %d)", got, aApplied)
	}
	if ts := pr.p.Targets(); len(ts) != 1 || ts[0].ID != "b" || ts[0].State != "N" || !ts[0].Connected {
		t.Errorf("targets %+v", ts)
	}
	pr.stop(t)
	checkTargets(t, storeLog(store), b)
}

// A target that refuses a delivery permanently (a malformed payload) is
// blocked, loudly, without a fast retry loop; the other targets carry on;
// after the operator fixes the target (here: skips the LSN) a remove and
// re-add resumes it.
func TestPermanentRefusalBlocksOnlyThatTarget(t *testing.T) {
	store := newFakeStore(t)
	bad := newShardTarget(t, "shard-0", "shard-0")
	good := newMemTarget(t, "rec", "shard-0")
	pr := startPlayer(t, store, []*testTarget{bad, good}, func(c *Config) { c.PermanentRetry = time.Hour })
	w := newWorkload(3, "shard-0")
	for range 20 {
		store.Append(w.next()...)
	}
	waitApplied(t, store, bad) // (a refused batch is refused whole)
	badLSN := store.Append(&logstorepb.Slice{Topic: "shard-0", Messages: []*logstorepb.Message{{Value: []byte("not a mutation")}}})
	for range 20 {
		store.Append(w.next()...)
	}
	waitApplied(t, store, good)
	testwait.For(t, testwait.Max, "the shard blocked", func() bool {
		ts := pr.p.Targets()
		return len(ts) == 2 && ts[1].ID == "shard-0" && ts[1].Blocked && !ts[1].Connected
	})
	if got := bad.applied(); got != badLSN-1 {
		t.Errorf("shard applied %d, want %d (just below the refused LSN)", got, badLSN-1)
	}
	if got := testmetric.Value(t, pr.reg, "logplayer_target_refusals_total", map[string]string{"target": "shard-0", "code": "APPLY_REJECTED"}); got != 1 {
		t.Errorf("APPLY_REJECTED refusals = %v, want 1", got)
	}
	for range 50 { // traffic flows on; the blocked shard is not hammered
		store.Append(w.next()...)
	}
	waitApplied(t, store, good)
	if got := bad.allRefusals()["permanent"]; got != 1 {
		t.Errorf("the shard refused %v times, want once (no retry loop)", got)
	}

	// The operator restarts the shard skipping the LSN and resumes it.
	bad.stop()
	bad.skip = []types.LSN{types.LSN(badLSN)}
	bad.start()
	ctx := context.Background()
	if err := pr.p.RemoveTarget(ctx, "shard-0"); err != nil {
		t.Fatal(err)
	}
	if err := pr.p.AddTarget(ctx, bad.config()); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, store, bad, good)
	if ts := pr.p.Targets(); ts[1].ID != "shard-0" || ts[1].Blocked || !ts[1].Connected {
		t.Errorf("resumed shard %+v", ts[1])
	}
	checkTargets(t, storeLog(store), good)
}

// A target that returns needing transactions the LogStore no longer holds
// is reported (blocked, metric, log) and left alone; the player and the
// other targets carry on.
func TestRecoveryBelowRetention(t *testing.T) {
	store := newFakeStore(t)
	lost := newMemTarget(t, "lost", "a")
	other := newMemTarget(t, "other", "a")
	pr := startPlayer(t, store, []*testTarget{lost, other}, func(c *Config) { c.PermanentRetry = time.Hour })
	msg := &logstorepb.Slice{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("x")}}}
	for range 10 {
		store.Append(msg)
	}
	waitApplied(t, store, lost)
	lost.stop()
	for range 50 {
		store.Append(msg)
	}
	waitApplied(t, store, other)
	store.Truncate(40) // retention forced past the lost target's position
	lost.start()
	testwait.For(t, testwait.Max, "the lost target blocked", func() bool {
		ts := pr.p.Targets()
		return ts[0].ID == "lost" && ts[0].Blocked && strings.Contains(ts[0].LastError, "retention")
	})
	if got := testmetric.Value(t, pr.reg, "logplayer_target_recovery_errors_total", map[string]string{"target": "lost", "reason": "below_retention"}); got != 1 {
		t.Errorf("below_retention recovery errors = %v", got)
	}
	if got := testmetric.Value(t, pr.reg, "logplayer_target_blocked", map[string]string{"target": "lost"}); got != 1 {
		t.Errorf("blocked gauge = %v", got)
	}
	for range 10 {
		store.Append(msg)
	}
	waitApplied(t, store, other)
	if got := lost.applied(); got != 10 {
		t.Errorf("lost target applied %d, want 10 (nothing after the gap)", got)
	}
	select {
	case err := <-pr.done:
		t.Fatalf("Run ended: %v", err)
	default:
	}
}
