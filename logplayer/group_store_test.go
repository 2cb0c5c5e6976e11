package logplayer

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Two group members on a real 3-node LogStore (the PlayerGroup service:
// registry, leases in log time, assignments with tokens): the first
// registers the targets, both share them; one dies without leaving (its
// connections cut, then its process ends) and the other takes its targets
// over; under continuous load every target ends with exactly the log for
// its topics.
func TestGroupRealLogStore(t *testing.T) {
	ls := startLogStore(t)
	cl, err := client.New(client.Config{Addrs: ls.addrs(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	targets := shardsAndRecorder(t, "shard-0", "shard-2")
	prod := startProducer(cl, newWorkload(11, "shard-0", "shard-1", "shard-2"))
	defer func() {
		select {
		case <-prod.stop:
		default:
			prod.halt()
		}
	}()
	prod.waitMore(t, 30)

	member := func(id string, register []*testTarget) *playerRun {
		return startPlayer(t, nil, register, func(c *Config) {
			c.PlayerID = id
			c.LogStore = ls.addrs()
			c.Group = &GroupConfig{Name: "players", LeaveTimeout: 500 * time.Millisecond}
		})
	}
	a := member("a", targets)
	testwait.For(t, testwait.Max, "a to own every target", func() bool { return len(owned(a.p)) == len(targets) })
	b := member("b", nil)
	waitSplit(t, targets, a.p, b.p)
	prod.waitMore(t, 60)
	for _, p := range []*Player{a.p, b.p} {
		for _, s := range p.Targets() {
			if s.HelloEpoch == 0 {
				t.Errorf("%s: target %s has no token", p.cfg.PlayerID, s.ID)
			}
		}
	}

	// b dies without leaving: its LogStore connections go first (no
	// heartbeat, no Leave can reach the store), then its process.
	killed := time.Now()
	b.p.Close()
	b.stop(t)
	testwait.For(t, testwait.Max, "a to own every target", func() bool { return len(owned(a.p)) == len(targets) })
	t.Logf("failover of %d targets took %v (lease %v)", len(targets)/2, time.Since(killed), 3*time.Second)
	prod.waitMore(t, 60)
	prod.halt()

	head := ls.head()
	for _, tt := range targets {
		testwait.For(t, testwait.Max, fmt.Sprintf("target %s to apply lsn %d", tt.id, head), func() bool { return tt.applied() >= head })
	}
	a.stop(t)
	log := readLog(t, cl, head)
	if uint64(len(log)) != head {
		t.Fatalf("read %d transactions, head %d", len(log), head)
	}
	checkTargets(t, log, targets...)
}

// freezeGroupCalls is a client interceptor that, while frozen is set, holds
// every PlayerGroup call until its deadline: the member's heartbeats stop
// reaching the LogStore (a paused or partitioned member) while its target
// streams and main stream stay up.
func freezeGroupCalls(frozen *atomic.Bool) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if frozen.Load() && strings.Contains(method, "PlayerGroup/") {
			<-ctx.Done()
			return status.Error(codes.Unavailable, "frozen by the test")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

// On a real LogStore, a member whose heartbeats stop while it is still
// connected to its targets stops delivering (its local lease deadline)
// before the LogStore gives its targets to the other member, at a log time
// after it stopped; after the pause it rejoins and gets its share with new
// tokens; delivery stays exact.
func TestGroupRealLogStorePausedMember(t *testing.T) {
	ls := startLogStore(t)
	cl, err := client.New(client.Config{Addrs: ls.addrs(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	targets := shardsAndRecorder(t, "shard-0", "shard-1")
	prod := startProducer(cl, newWorkload(12, "shard-0", "shard-1", "shard-2"))
	defer func() {
		select {
		case <-prod.stop:
		default:
			prod.halt()
		}
	}()
	var frozen atomic.Bool
	member := func(id string, register []*testTarget, opts ...grpc.DialOption) *playerRun {
		return startPlayer(t, nil, register, func(c *Config) {
			c.PlayerID = id
			c.LogStore = ls.addrs()
			c.DialOptions = opts
			c.Group = &GroupConfig{Name: "players", LeaveTimeout: 500 * time.Millisecond}
		})
	}
	a := member("a", targets)
	testwait.For(t, testwait.Max, "a to own every target", func() bool { return len(owned(a.p)) == len(targets) })
	b := member("b", nil, freezeGroupCalls(&frozen))
	waitSplit(t, targets, a.p, b.p)
	prod.waitMore(t, 60)
	bTargets := owned(b.p)

	frozen.Store(true)
	testwait.For(t, testwait.Max, "a to own every target", func() bool { return len(owned(a.p)) == len(targets) })
	g, _ := b.p.Group()
	if g.Lapses != 1 || len(owned(b.p)) != 0 {
		t.Fatalf("paused member: %d lapses, targets %v", g.Lapses, owned(b.p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := cl.ListRegisteredTargets(ctx, "players")
	if err != nil {
		t.Fatal(err)
	}
	for _, as := range reg.Assignments {
		if !bTargets[as.Target.GetId()] {
			continue
		}
		if as.MemberId != "a" || !g.LastLapse.Before(time.Unix(0, as.AssignedUnixNano)) {
			t.Errorf("target %s: assigned to %s at log time %v, the paused member stopped at %v",
				as.Target.GetId(), as.MemberId, time.Unix(0, as.AssignedUnixNano), g.LastLapse)
		}
	}
	prod.waitMore(t, 60)

	frozen.Store(false)
	waitSplit(t, targets, a.p, b.p)
	prod.waitMore(t, 60)
	prod.halt()
	head := ls.head()
	for _, tt := range targets {
		testwait.For(t, testwait.Max, fmt.Sprintf("target %s to apply lsn %d", tt.id, head), func() bool { return tt.applied() >= head })
	}
	a.stop(t)
	b.stop(t)
	checkTargets(t, readLog(t, cl, head), targets...)
}

// A group member that starts while the LogStore still runs below the
// cluster version target registration needs (a voter not yet upgraded, or
// a new cluster before its first version poll) waits for the version and
// then registers; Run does not fail.
func TestGroupRegisterWaitsForClusterVersion(t *testing.T) {
	ls := startLogStore(t, func(i int, cfg *logstore.Config) {
		if i == 2 {
			cfg.AdvertisedVersion = fsm.BaseVersion // an old voter
		}
	})
	targets := []*testTarget{newShardTarget(t, "shard-0", "shard-0")}
	var refused atomic.Int64 // RegisterTarget calls answered FEATURE_NOT_ENABLED
	countRefusals := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if strings.HasSuffix(method, "/RegisterTarget") && apierr.CodeOf(err) == logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
			refused.Add(1)
		}
		return err
	})
	a := startPlayer(t, nil, targets, func(c *Config) {
		c.PlayerID = "a"
		c.LogStore = ls.addrs()
		c.DialOptions = []grpc.DialOption{countRefusals}
		c.Group = &GroupConfig{Name: "players"}
	})
	// Refused several times (the backoff doubles from 50 ms): the member
	// retried rather than giving up at the first refusal.
	testwait.For(t, testwait.Max, "3 refused registrations", func() bool { return refused.Load() >= 3 })
	select {
	case err := <-a.done:
		a.done <- err // for the cleanup's stop
		t.Fatalf("Run returned while the cluster was below version %d: %v", fsm.CurrentVersion, err)
	default:
	}
	if n := len(owned(a.p)); n != 0 {
		t.Fatalf("a owns %d targets before they could be registered", n)
	}
	ls.stop(2)
	ls.cfgs[2].AdvertisedVersion = 0 // the upgraded binary
	ls.restart(2)
	testwait.For(t, testwait.Max, "a to own shard-0 once the cluster is upgraded", func() bool { return len(owned(a.p)) == 1 })
}
