package logplayer

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
)

func startAdmin(t *testing.T, p *Player) playerpb.PlayerAdminClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	NewAdminServer(p).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return playerpb.NewPlayerAdminClient(cc)
}

func wantStatus(t *testing.T, err error, code codes.Code, ec logstorepb.ErrorCode) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || apierr.CodeOf(err) != ec {
		t.Fatalf("err = %v (detail %v), want %v with %v", err, apierr.CodeOf(err), code, ec)
	}
}

func TestAdminAPI(t *testing.T) {
	store := newFakeStore(t)
	a := newMemTarget(t, "a", "t")
	pr := startPlayer(t, store, []*testTarget{a}, nil)
	admin := startAdmin(t, pr.p)
	ctx := context.Background()
	for range 30 {
		store.Append(&logstorepb.Slice{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
	}

	b := newMemTarget(t, "b", "t")
	cfgB := &playerpb.TargetConfig{Id: "b", Address: b.addr, Topics: []string{"t"}}
	if _, err := admin.AddTarget(ctx, &playerpb.AddTargetRequest{Target: cfgB}); err != nil {
		t.Fatal(err)
	}
	_, err := admin.AddTarget(ctx, &playerpb.AddTargetRequest{Target: cfgB})
	wantStatus(t, err, codes.AlreadyExists, logstorepb.ErrorCode_INVALID_ARGUMENT)
	_, err = admin.AddTarget(ctx, &playerpb.AddTargetRequest{Target: &playerpb.TargetConfig{Id: "c", Address: b.addr, Topics: []string{"bad topic"}}})
	wantStatus(t, err, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT)
	_, err = admin.AddTarget(ctx, &playerpb.AddTargetRequest{})
	wantStatus(t, err, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT)
	_, err = admin.RemoveTarget(ctx, &playerpb.RemoveTargetRequest{Id: "nope"})
	wantStatus(t, err, codes.NotFound, logstorepb.ErrorCode_INVALID_ARGUMENT)

	waitApplied(t, store, a, b)
	var list *playerpb.ListTargetsResponse
	testwait.For(t, testwait.Max, "both targets listed caught up", func() bool {
		list, err = admin.ListTargets(ctx, &playerpb.ListTargetsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Targets) == 2 && list.Targets[0].LastAckLsn == 30 && list.Targets[1].LastAckLsn == 30
	})
	if list.Epoch != uint64(pr.p.Epoch()) || list.CurrentLsn != 30 || list.PlayerId == "" {
		t.Errorf("list header %+v", list)
	}
	for _, ts := range list.Targets {
		if ts.State != "N" || !ts.Connected || ts.Blocked || ts.LagEntries != 0 || ts.Returns != 1 || ts.IncarnationId == "" {
			t.Errorf("target %s: %+v", ts.Config.Id, ts)
		}
	}
	if list.Targets[1].Config.Id != "b" || list.Targets[1].Config.Address != b.addr {
		t.Errorf("second target %+v", list.Targets[1].Config)
	}

	if _, err := admin.RemoveTarget(ctx, &playerpb.RemoveTargetRequest{Id: "a"}); err != nil {
		t.Fatal(err)
	}
	list, err = admin.ListTargets(ctx, &playerpb.ListTargetsRequest{})
	if err != nil || len(list.Targets) != 1 || list.Targets[0].Config.Id != "b" {
		t.Fatalf("after remove: %v %v", list, err)
	}
	if got := testmetric.Value(t, pr.reg, "logplayer_target_last_ack_lsn", map[string]string{"target": "a"}); got != 0 {
		t.Errorf("removed target still has metrics: last ack %v", got)
	}

	pr.stop(t)
	_, err = admin.AddTarget(ctx, &playerpb.AddTargetRequest{Target: &playerpb.TargetConfig{Id: "c", Address: b.addr, Topics: []string{"t"}}})
	wantStatus(t, err, codes.Unavailable, logstorepb.ErrorCode_SHUTTING_DOWN)
}
