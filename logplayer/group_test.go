package logplayer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/playerpb"
)

// testLease is the group lease of these tests: long enough that a loaded
// machine does not lapse a healthy member, short enough for failovers.
const testLease = 2 * time.Second

// startMember starts a group member on store whose group calls go to
// conns (the fake PlayerGroup server, or the LogStore).
func startMember(t testing.TB, store *fakeStore, conns []grpc.ClientConnInterface, id string, register []*testTarget, tweak func(*GroupConfig)) *playerRun {
	t.Helper()
	return startPlayer(t, store, register, func(c *Config) {
		c.PlayerID = id
		c.Group = &GroupConfig{Name: "g", Conns: conns, LeaveTimeout: 500 * time.Millisecond}
		if tweak != nil {
			tweak(c.Group)
		}
	})
}

// owned returns the ids of the targets the player delivers to.
func owned(p *Player) map[string]bool {
	out := map[string]bool{}
	for _, s := range p.Targets() {
		out[s.ID] = true
	}
	return out
}

// groupTargets starts n recording targets t0..t(n-1), each on its topic.
func groupTargets(t testing.TB, n int) ([]*testTarget, []string) {
	var ts []*testTarget
	var topics []string
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		ts = append(ts, newMemTarget(t, id, id))
		topics = append(topics, id)
	}
	return ts, topics
}

// appendN appends n workload transactions.
func appendN(store *fakeStore, w *workload, n int) {
	for range n {
		store.Append(w.next()...)
	}
}

// waitSplit waits until the players together deliver to every target,
// each target by exactly one of them, and each player to its share.
func waitSplit(t testing.TB, targets []*testTarget, players ...*Player) {
	t.Helper()
	testwait.For(t, testwait.Max, "the targets split among the players", func() bool {
		n := 0
		for _, p := range players {
			o := owned(p)
			if len(o) < len(targets)/len(players) {
				return false
			}
			n += len(o)
		}
		if n != len(targets) {
			return false
		}
		for _, tt := range targets {
			k := 0
			for _, p := range players {
				if owned(p)[tt.id] {
					k++
				}
			}
			if k != 1 {
				return false
			}
		}
		return true
	})
}

// Two members share the targets: each target is delivered by exactly one,
// with its token as the Hello epoch, and every target gets exactly the
// log's messages for its topics.
func TestGroupSharesTargets(t *testing.T) {
	store := newFakeStore(t)
	fg := newFakeGroup(t, testLease)
	targets, topics := groupTargets(t, 4)
	w := newWorkload(1, topics...)
	a := startMember(t, store, fg.conns(t), "a", targets, nil) // registers them
	appendN(store, w, 50)
	testwait.For(t, testwait.Max, "a to own every target", func() bool { return len(owned(a.p)) == 4 })
	b := startMember(t, store, fg.conns(t), "b", nil, nil)
	appendN(store, w, 50)
	waitSplit(t, targets, a.p, b.p)
	appendN(store, w, 100)
	waitApplied(t, store, targets...)
	for _, p := range []*Player{a.p, b.p} {
		for _, s := range p.Targets() {
			if want := fg.token(s.ID); uint64(s.HelloEpoch) != want {
				t.Errorf("%s: target %s hello epoch %d, token %d", p.cfg.PlayerID, s.ID, s.HelloEpoch, want)
			}
		}
		g, ok := p.Group()
		if !ok || g.Group != "g" || g.LeaseRemaining <= 0 || g.Renewals == 0 || g.Lapses != 0 {
			t.Errorf("%s: group status %+v", p.cfg.PlayerID, g)
		}
	}
	if err := a.p.AddTarget(context.Background(), targets[0].config()); err != ErrGroupManaged {
		t.Errorf("AddTarget on a member: %v", err)
	}
	// a gained all four, then lost two to b.
	if g, l := testmetric.Value(t, a.reg, "logplayer_group_reassignments_total", map[string]string{"change": "gained"}),
		testmetric.Value(t, a.reg, "logplayer_group_reassignments_total", map[string]string{"change": "lost"}); g != 4 || l != 2 {
		t.Errorf("a: gained %v, lost %v; want 4, 2", g, l)
	}
	if n := testmetric.Value(t, b.reg, "logplayer_group_lease_renewal_seconds", nil); n == 0 {
		t.Error("no lease renewal observed")
	}
	resp, err := NewAdminServer(b.p).ListTargets(context.Background(), &playerpb.ListTargetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if g := resp.Group; g == nil || g.Group != "g" || g.MemberId != "b" || g.LeaseRemainingNanos <= 0 || g.TargetsGained != 2 {
		t.Errorf("ListTargets group %v", g)
	}
	for _, ts := range resp.Targets {
		if ts.Epoch != fg.token(ts.Config.Id) {
			t.Errorf("ListTargets: %s epoch %d, token %d", ts.Config.Id, ts.Epoch, fg.token(ts.Config.Id))
		}
	}
	a.stop(t)
	b.stop(t)
	checkTargets(t, storeLog(store), targets...)
}

// A member that dies without leaving (its heartbeats stop, its process
// ends) loses its targets to the other member within about two leases;
// delivery resumes from each target's durable applied LSN and nothing is
// applied twice.
func TestGroupFailover(t *testing.T) {
	store := newFakeStore(t)
	fg := newFakeGroup(t, testLease)
	targets, topics := groupTargets(t, 4)
	w := newWorkload(2, topics...)
	a := startMember(t, store, fg.conns(t), "a", targets, nil)
	b := startMember(t, store, fg.conns(t), "b", nil, nil)
	waitSplit(t, targets, a.p, b.p)

	var wg sync.WaitGroup
	stopLoad := make(chan struct{})
	wg.Add(1)
	go func() { // load through the failover
		defer wg.Done()
		for {
			select {
			case <-stopLoad:
				return
			case <-time.After(2 * time.Millisecond):
				store.Append(w.next()...)
			}
		}
	}()
	h := store.Head()
	testwait.For(t, testwait.Max, "some load before the kill", func() bool { return store.Head() >= h+50 })
	fg.freeze("b", true) // kill -9: no heartbeat, no Leave
	killed := time.Now()
	b.stop(t)
	testwait.For(t, testwait.Max, "a to own every target", func() bool { return len(owned(a.p)) == 4 })
	t.Logf("failover of %d targets took %v (lease %v)", 2, time.Since(killed), testLease)
	close(stopLoad)
	wg.Wait()
	waitApplied(t, store, targets...)
	a.stop(t)
	checkTargets(t, storeLog(store), targets...)
}

// A paused member (its heartbeats hang) stops delivering when its local
// lease deadline passes, before the LogStore gives its targets to the other
// member: the targets never have to refuse it. After the pause it renews,
// takes its share again with new tokens, and delivery is exact.
func TestGroupPausedMemberStopsBeforeNewOwner(t *testing.T) {
	store := newFakeStore(t)
	fg := newFakeGroup(t, testLease)
	targets, topics := groupTargets(t, 4)
	w := newWorkload(3, topics...)
	a := startMember(t, store, fg.conns(t), "a", targets, nil)
	b := startMember(t, store, fg.conns(t), "b", nil, func(g *GroupConfig) { g.LeaseMargin = 0.3 })
	waitSplit(t, targets, a.p, b.p)
	appendN(store, w, 50)
	waitApplied(t, store, targets...)
	bTargets := owned(b.p)
	staleBefore := map[string]float64{} // refusals of the handover when b joined
	for _, tt := range targets {
		staleBefore[tt.id] = tt.allRefusals()["stale_epoch"]
	}

	frozeAt := time.Now()
	fg.freeze("b", true)
	testwait.For(t, testwait.Max, "a to own every target", func() bool { return len(owned(a.p)) == 4 })
	g, _ := b.p.Group()
	if g.Lapses != 1 || len(owned(b.p)) != 0 || testmetric.Value(t, b.reg, "logplayer_group_lease_lapses_total", nil) != 1 {
		t.Fatalf("paused member: lapses %d, targets %v", g.Lapses, owned(b.p))
	}
	for _, gr := range fg.grants() {
		if gr.member == "a" && bTargets[gr.target] && gr.at.After(frozeAt) && !g.LastLapse.Before(gr.at) {
			t.Errorf("target %s granted to a at %v, before b stopped at %v", gr.target, gr.at, g.LastLapse)
		}
	}
	appendN(store, w, 50)
	waitApplied(t, store, targets...)
	for _, tt := range targets {
		if n := tt.allRefusals()["stale_epoch"] - staleBefore[tt.id]; n != 0 && bTargets[tt.id] {
			t.Errorf("target %s refused %v stale streams: the paused member still had a stream open", tt.id, n)
		}
	}

	fg.freeze("b", false)
	waitSplit(t, targets, a.p, b.p)
	appendN(store, w, 50)
	waitApplied(t, store, targets...)
	a.stop(t)
	b.stop(t)
	checkTargets(t, storeLog(store), targets...)
}

// The backstop: a zombie member that ignores its lease (the lease check
// disabled) keeps delivering after the LogStore moved its targets; each
// target refuses its old token (STALE_EPOCH) once the new owner said
// hello, the zombie stops delivering to it, and nothing is applied twice.
func TestGroupZombieIsFencedByToken(t *testing.T) {
	store := newFakeStore(t)
	fg := newFakeGroup(t, testLease)
	targets, topics := groupTargets(t, 4)
	w := newWorkload(4, topics...)
	a := startMember(t, store, fg.conns(t), "a", targets, nil)
	z := startMember(t, store, fg.conns(t), "z", nil, func(g *GroupConfig) { g.noLeaseCheck = true })
	waitSplit(t, targets, a.p, z.p)
	zTargets := owned(z.p)
	fg.freeze("z", true)

	stopLoad := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopLoad:
				return
			case <-time.After(2 * time.Millisecond):
				store.Append(w.next()...)
			}
		}
	}()
	testwait.For(t, testwait.Max, "a to own every target", func() bool {
		owners := fg.owners()
		for _, tt := range targets {
			if owners[tt.id] != "a" {
				return false
			}
		}
		return len(owned(a.p)) == 4
	})
	testwait.For(t, testwait.Max, "the zombie's targets to refuse its token", func() bool {
		for id := range zTargets {
			if targetByID(targets, id).allRefusals()["stale_epoch"] == 0 {
				return false
			}
		}
		return true
	})
	close(stopLoad)
	wg.Wait()
	waitApplied(t, store, targets...)
	for _, s := range z.p.Targets() {
		if s.Connected {
			t.Errorf("zombie still connected to %s", s.ID)
		}
	}
	a.stop(t)
	z.stop(t) // Run returns nil: a fenced target does not end a member
	checkTargets(t, storeLog(store), targets...)
}

func targetByID(ts []*testTarget, id string) *testTarget {
	for _, tt := range ts {
		if tt.id == id {
			return tt
		}
	}
	return nil
}
