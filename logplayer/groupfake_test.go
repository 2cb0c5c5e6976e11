package logplayer

import (
	"context"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// fakeGroup is an in-memory PlayerGroup server with the contract of
// proto/logstore.proto: leases on its own clock (the test's), sticky
// assignments balanced by count, a new token on every change of owner.
// A member can be frozen: its calls hang until their deadline (a paused
// or partitioned player).
type fakeGroup struct {
	t     testing.TB
	lease time.Duration
	addr  string

	mu struct {
		sync.Mutex
		token   uint64
		targets map[string]*logstorepb.RegisteredTarget
		members map[string]*fakeMember
		assign  map[string]*logstorepb.Assignment // by target id
		frozen  map[string]bool
		grants  []fakeGrant
		gen     uint64
	}
	logstorepb.UnimplementedPlayerGroupServer
}

type fakeMember struct {
	incarnation string
	expires     time.Time
}

// fakeGrant is one change of owner.
type fakeGrant struct {
	target, member string
	token          uint64
	at             time.Time
}

func newFakeGroup(t testing.TB, lease time.Duration) *fakeGroup {
	t.Helper()
	g := &fakeGroup{t: t, lease: lease}
	g.mu.token = 1000 // above any epoch of the fake store
	g.mu.targets = map[string]*logstorepb.RegisteredTarget{}
	g.mu.members = map[string]*fakeMember{}
	g.mu.assign = map[string]*logstorepb.Assignment{}
	g.mu.frozen = map[string]bool{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	logstorepb.RegisterPlayerGroupServer(gs, g)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	g.addr = lis.Addr().String()
	return g
}

// conns dials the fake for a player's GroupConfig.Conns.
func (g *fakeGroup) conns(t testing.TB) []grpc.ClientConnInterface {
	cc, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return []grpc.ClientConnInterface{cc}
}

func (g *fakeGroup) freeze(member string, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.frozen[member] = on
}

// wait blocks a frozen member's call until its deadline.
func (g *fakeGroup) wait(ctx context.Context, member string) error {
	g.mu.Lock()
	frozen := g.mu.frozen[member]
	g.mu.Unlock()
	if !frozen {
		return nil
	}
	<-ctx.Done()
	return status.Error(codes.Unavailable, "frozen")
}

// owners returns target id -> member id of the current assignment.
func (g *fakeGroup) owners() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for id, a := range g.mu.assign {
		out[id] = a.MemberId
	}
	return out
}

func (g *fakeGroup) token(target string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if a := g.mu.assign[target]; a != nil {
		return a.Token
	}
	return 0
}

func (g *fakeGroup) grants() []fakeGrant {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.mu.grants)
}

func (g *fakeGroup) RegisterTarget(_ context.Context, req *logstorepb.RegisterTargetRequest) (*logstorepb.RegisterTargetResponse, error) {
	if req.Target == nil || req.Target.Id == "" {
		return nil, status.Error(codes.InvalidArgument, "no target")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.targets[req.Target.Id] = req.Target
	g.rebalanceLocked(time.Now())
	return &logstorepb.RegisterTargetResponse{}, nil
}

func (g *fakeGroup) Heartbeat(ctx context.Context, req *logstorepb.GroupHeartbeatRequest) (*logstorepb.GroupHeartbeatResponse, error) {
	if err := g.wait(ctx, req.MemberId); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	m := g.mu.members[req.MemberId]
	if m == nil || m.incarnation != req.Incarnation {
		delete(g.mu.members, req.MemberId)
		g.rebalanceLocked(now)
		m = &fakeMember{incarnation: req.Incarnation}
		g.mu.members[req.MemberId] = m
	}
	m.expires = now.Add(g.lease)
	g.rebalanceLocked(now)
	resp := &logstorepb.GroupHeartbeatResponse{
		LogTimeUnixNano: now.UnixNano(), LeaseExpiresUnixNano: m.expires.UnixNano(),
		LeaseNanos: int64(g.lease), Generation: g.mu.gen,
	}
	for _, id := range sortedIDs(g.mu.assign) {
		if a := g.mu.assign[id]; a.MemberId == req.MemberId {
			resp.Assignments = append(resp.Assignments, a)
		}
	}
	return resp, nil
}

func (g *fakeGroup) LeaveGroup(ctx context.Context, req *logstorepb.LeaveGroupRequest) (*logstorepb.LeaveGroupResponse, error) {
	if err := g.wait(ctx, req.MemberId); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if m := g.mu.members[req.MemberId]; m != nil && m.incarnation == req.Incarnation {
		delete(g.mu.members, req.MemberId)
		g.rebalanceLocked(time.Now())
	}
	return &logstorepb.LeaveGroupResponse{}, nil
}

// rebalanceLocked drops expired members and assigns every target to a live
// member: sticky, balanced by count (ties by id).
func (g *fakeGroup) rebalanceLocked(now time.Time) {
	for id, m := range g.mu.members {
		if !now.Before(m.expires) && !m.expires.IsZero() {
			delete(g.mu.members, id)
		}
	}
	members := sortedIDs(g.mu.members)
	held := map[string][]string{}
	var free []string
	for _, id := range sortedIDs(g.mu.targets) {
		if a := g.mu.assign[id]; a != nil && g.mu.members[a.MemberId] != nil {
			held[a.MemberId] = append(held[a.MemberId], id)
		} else {
			free = append(free, id)
		}
	}
	for id := range g.mu.assign {
		if g.mu.targets[id] == nil {
			delete(g.mu.assign, id)
		}
	}
	if len(members) == 0 {
		return
	}
	ceil := (len(g.mu.targets) + len(members) - 1) / len(members)
	for _, m := range members {
		for len(held[m]) > ceil {
			free = append(free, held[m][len(held[m])-1])
			held[m] = held[m][:len(held[m])-1]
		}
	}
	least := func() string {
		best := members[0]
		for _, m := range members[1:] {
			if len(held[m]) < len(held[best]) {
				best = m
			}
		}
		return best
	}
	most := func() string {
		best := members[0]
		for _, m := range members[1:] {
			if len(held[m]) > len(held[best]) {
				best = m
			}
		}
		return best
	}
	for _, id := range free {
		m := least()
		held[m] = append(held[m], id)
	}
	for {
		lo, hi := least(), most()
		if len(held[hi])-len(held[lo]) <= 1 {
			break
		}
		id := held[hi][len(held[hi])-1]
		held[hi] = held[hi][:len(held[hi])-1]
		held[lo] = append(held[lo], id)
	}
	for m, ids := range held {
		for _, id := range ids {
			if a := g.mu.assign[id]; a != nil && a.MemberId == m {
				continue
			}
			g.mu.token++
			g.mu.gen++
			g.mu.assign[id] = &logstorepb.Assignment{Target: g.mu.targets[id], MemberId: m, Token: g.mu.token, AssignedUnixNano: now.UnixNano()}
			g.mu.grants = append(g.mu.grants, fakeGrant{target: id, member: m, token: g.mu.token, at: now})
		}
	}
}

func sortedIDs[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
