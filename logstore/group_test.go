package logstore_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func groupConn(t testing.TB, addr string) logstorepb.PlayerGroupClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return logstorepb.NewPlayerGroupClient(cc)
}

// waitVersion3 waits until the leader has committed cluster version 3
// (the PlayerGroup commands need it).
func waitVersion3(t testing.TB, c *testCluster) *logstore.Node {
	t.Helper()
	var leader *logstore.Node
	testwait.For(t, 60*time.Second, "cluster version 3", func() bool {
		leader = c.waitLeader()
		return leader.ClusterVersion() >= 3
	})
	return leader
}

func target(id string, topics ...string) *logstorepb.RegisterTargetRequest {
	return &logstorepb.RegisterTargetRequest{Target: &logstorepb.RegisteredTarget{Id: id, Address: "127.0.0.1:7000", Topics: topics}}
}

// TestPlayerGroupBadInput: every bad request gets its typed error and
// changes nothing.
func TestPlayerGroupBadInput(t *testing.T) {
	c := startCluster(t, 1, nil)
	leader := waitVersion3(t, c)
	pg := groupConn(t, leader.APIAddr())
	ctx := ctxT(t, 60*time.Second)
	reg := func(t *logstorepb.RegisteredTarget) error {
		_, err := pg.RegisterTarget(ctx, &logstorepb.RegisterTargetRequest{Target: t})
		return err
	}
	good := func(mod func(*logstorepb.RegisteredTarget)) *logstorepb.RegisteredTarget {
		t := proto.Clone(target("x", "a").Target).(*logstorepb.RegisteredTarget)
		mod(t)
		return t
	}
	hb := func(g, m string) error {
		_, err := pg.Heartbeat(ctx, &logstorepb.GroupHeartbeatRequest{Group: g, MemberId: m})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
		ec   logstorepb.ErrorCode
	}{
		{"no target", reg(nil), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"empty id", reg(good(func(t *logstorepb.RegisteredTarget) { t.Id = "" })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"bad id", reg(good(func(t *logstorepb.RegisteredTarget) { t.Id = "a/b" })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"no port", reg(good(func(t *logstorepb.RegisteredTarget) { t.Address = "host" })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"no host", reg(good(func(t *logstorepb.RegisteredTarget) { t.Address = ":80" })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"bad port", reg(good(func(t *logstorepb.RegisteredTarget) { t.Address = "h:99999" })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"no topics", reg(good(func(t *logstorepb.RegisteredTarget) { t.Topics = nil })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"bad topic", reg(good(func(t *logstorepb.RegisteredTarget) { t.Topics = []string{"a b"} })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_TOPIC},
		{"duplicate topic", reg(good(func(t *logstorepb.RegisteredTarget) { t.Topics = []string{"a", "a"} })), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"option", reg(good(func(t *logstorepb.RegisteredTarget) {
			t.Options = []*logstorepb.Header{{Key: "max_inflight_batches", Value: []byte("4")}}
		})), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"too large", reg(good(func(t *logstorepb.RegisteredTarget) {
			for range 400 {
				t.Topics = append(t.Topics, strings.Repeat("t", 200)+string(rune('a'+len(t.Topics)%26))+strings.Repeat("x", len(t.Topics)%40))
			}
		})), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"heartbeat no group", hb("", "m"), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"heartbeat no member", hb("g", ""), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"heartbeat bad admin address", func() error {
			_, err := pg.Heartbeat(ctx, &logstorepb.GroupHeartbeatRequest{Group: "g", MemberId: "m", AdminAddress: "nope"})
			return err
		}(), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"leave no member", func() error {
			_, err := pg.LeaveGroup(ctx, &logstorepb.LeaveGroupRequest{Group: "g"})
			return err
		}(), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"describe no group", func() error {
			_, err := pg.DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{})
			return err
		}(), codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"unregister unknown", func() error {
			_, err := pg.UnregisterTarget(ctx, &logstorepb.UnregisterTargetRequest{Id: "nope"})
			return err
		}(), codes.NotFound, logstorepb.ErrorCode_UNKNOWN_TARGET},
	} {
		if status.Code(tc.err) != tc.code || apierr.CodeOf(tc.err) != tc.ec {
			t.Errorf("%s: got %v (%v), want %v %v", tc.name, tc.err, apierr.CodeOf(tc.err), tc.code, tc.ec)
		}
	}
	list, err := pg.ListRegisteredTargets(ctx, &logstorepb.ListRegisteredTargetsRequest{})
	if err != nil || len(list.Targets) != 0 {
		t.Fatalf("bad input changed the registry: %v %v", list, err)
	}
	if _, err := pg.RegisterTarget(ctx, target("x", "a")); err != nil {
		t.Fatal(err)
	}
	// A new target's consumer row holds retention until its owner reports.
	st, err := rawConn(t, leader.APIAddr()).Status(ctx, &logstorepb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Consumers) != 1 || st.Consumers[0].Consumer != logplayer.ConsumerName("x") || st.Consumers[0].AckedLsn != 0 ||
		fsm.TargetConsumer("x") != logplayer.ConsumerName("x") || st.RegisteredTargets != 1 {
		t.Fatalf("status after register: consumers %v registered %d", st.Consumers, st.RegisteredTargets)
	}
}

// TestPlayerGroupFollowerAndFailover: on a 3-node cluster, a heartbeat on
// a follower is NOT_LEADER naming the leader; reads on a follower show
// the leader's assignment; after the leader stops, the new leader keeps
// every member, owner and token, and its next epoch is above every token.
func TestPlayerGroupFollowerAndFailover(t *testing.T) {
	c := startCluster(t, 3, func(cfg *logstore.Config) { cfg.GroupLease = time.Minute })
	leader := waitVersion3(t, c)
	ctx := ctxT(t, 120*time.Second)
	var li, fi int
	for i, n := range c.nodes {
		if n == leader {
			li = i
		} else {
			fi = i
		}
	}
	pg := groupConn(t, leader.APIAddr())
	for _, id := range []string{"t1", "t2", "t3", "t4", "t5"} {
		if _, err := pg.RegisterTarget(ctx, target(id, "a", "b")); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(pg logstorepb.PlayerGroupClient, m string) (*logstorepb.GroupHeartbeatResponse, error) {
		return pg.Heartbeat(ctx, &logstorepb.GroupHeartbeatRequest{Group: "g", MemberId: m, Incarnation: m + "-1", AdminAddress: "127.0.0.1:9"})
	}
	for _, m := range []string{"m1", "m2"} {
		if _, err := beat(pg, m); err != nil {
			t.Fatal(err)
		}
	}
	r1, err := beat(pg, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Assignments) != 3 || r1.LeaseNanos != int64(time.Minute) || r1.Generation == 0 {
		t.Fatalf("m1's heartbeat: %v", r1)
	}
	before, err := pg.DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Members) != 2 || before.Members[0].Targets+before.Members[1].Targets != 5 {
		t.Fatalf("describe: %v", before)
	}

	reg := leader.Registry()
	if m, tg, hb := testmetric.Value(t, reg, "logstore_group_members", nil), testmetric.Value(t, reg, "logstore_registered_targets", nil),
		testmetric.Value(t, reg, "logstore_group_heartbeat_duration_seconds", map[string]string{"code": "OK"}); m != 2 || tg != 5 || hb != 3 {
		t.Fatalf("metrics: members %v targets %v heartbeats %v, want 2 5 3", m, tg, hb)
	}

	fpg := groupConn(t, c.nodes[fi].APIAddr())
	_, err = beat(fpg, "m1")
	if d := apierr.Detail(err); status.Code(err) != codes.Unavailable || d.GetCode() != logstorepb.ErrorCode_NOT_LEADER || d.GetLeaderId() != leader.ID() {
		t.Fatalf("heartbeat on a follower: %v (detail %v)", err, d)
	}
	testwait.For(t, 30*time.Second, "the follower applied the assignment", func() bool {
		d, err := fpg.DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{Group: "g"})
		return err == nil && proto.Equal(&logstorepb.DescribeGroupResponse{Members: d.Members, Assignments: d.Assignments},
			&logstorepb.DescribeGroupResponse{Members: before.Members, Assignments: before.Assignments})
	})

	c.stop(li)
	next := c.waitLeader()
	npg := groupConn(t, next.APIAddr())
	var after *logstorepb.GroupHeartbeatResponse
	testwait.For(t, 60*time.Second, "m1's heartbeat on the new leader", func() bool {
		after, err = beat(npg, "m1")
		if err != nil {
			next = c.waitLeader()
			npg = groupConn(t, next.APIAddr())
		}
		return err == nil
	})
	if !proto.Equal(&logstorepb.GroupHeartbeatResponse{Assignments: after.Assignments}, &logstorepb.GroupHeartbeatResponse{Assignments: r1.Assignments}) {
		t.Fatalf("failover changed m1's assignment:\n%v\nwant\n%v", after.Assignments, r1.Assignments)
	}
	d, err := npg.DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&logstorepb.DescribeGroupResponse{Assignments: d.Assignments}, &logstorepb.DescribeGroupResponse{Assignments: before.Assignments}) || d.Reassignments != before.Reassignments {
		t.Fatalf("failover changed the assignment:\n%v\nwant\n%v", d, before)
	}
	e, err := rawConn(t, next.APIAddr()).NextEpoch(ctx, &logstorepb.NextEpochRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range d.Assignments {
		if a.Token == 0 || a.Token >= e.Epoch {
			t.Fatalf("target %s token %d, next epoch %d", a.Target.Id, a.Token, e.Epoch)
		}
	}
	// m2 leaves: its targets move to m1 at once, with new tokens above e.
	if _, err := npg.LeaveGroup(ctx, &logstorepb.LeaveGroupRequest{Group: "g", MemberId: "m2", Incarnation: "m2-1"}); err != nil {
		t.Fatal(err)
	}
	r, err := beat(npg, "m1")
	if err != nil || len(r.Assignments) != 5 {
		t.Fatalf("after m2 left m1 has %v (%v)", r, err)
	}
	for _, a := range r.Assignments {
		moved := true
		for _, old := range r1.Assignments {
			if old.Target.Id == a.Target.Id {
				moved = old.Token != a.Token
			}
		}
		if moved && a.Token <= e.Epoch {
			t.Fatalf("moved target %s token %d not above epoch %d", a.Target.Id, a.Token, e.Epoch)
		}
	}
	// m2's targets moved twice: to m2 at its join, back to m1 at its leave.
	if moves, m2had := testmetric.Value(t, next.Registry(), "logstore_group_reassignments_total", nil), len(r.Assignments)-len(r1.Assignments); moves != float64(2*m2had) {
		t.Fatalf("reassignments metric %v, want %d (m2's targets, twice)", moves, 2*m2had)
	}
	list, err := npg.ListRegisteredTargets(ctx, &logstorepb.ListRegisteredTargetsRequest{Group: "g"})
	if err != nil || len(list.Targets) != 5 || len(list.Assignments) != 5 {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := npg.UnregisterTarget(ctx, &logstorepb.UnregisterTargetRequest{Id: "t1"}); err != nil {
		t.Fatal(err)
	}
}
