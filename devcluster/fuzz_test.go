package devcluster_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/devcluster"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
)

// rawCodec passes request and response bytes through untouched: the
// fuzzer's bytes reach the server's decoder as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// fuzzMethod is one RPC of a live server: where it is served, whether it
// streams, and who calls it. Read-only RPCs are called by the CLI token
// (every grant: the handlers decode and validate the bytes); the writing
// ones by an identity without grants (decoded, then refused), so no input
// can change the cluster.
type fuzzMethod struct {
	name   string
	server string // "store", "admin" or "shard"
	stream bool
	as     string
	seed   proto.Message
}

var fuzzMethods = []fuzzMethod{
	{logstorepb.LogStore_Read_FullMethodName, "store", true, cli, &logstorepb.ReadRequest{FromLsn: 1, ToLsn: 1}},
	{logstorepb.LogStore_ReadTopic_FullMethodName, "store", true, cli, &logstorepb.ReadTopicRequest{Topic: "orders", MaxMessages: 1}},
	{logstorepb.LogStore_FetchOffsets_FullMethodName, "store", false, cli, &logstorepb.FetchOffsetsRequest{Group: "g"}},
	{logstorepb.LogStore_Status_FullMethodName, "store", false, cli, &logstorepb.StatusRequest{}},
	{logstorepb.LogStore_Append_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.AppendRequest{Slices: orders("x")}},
	{logstorepb.LogStore_AppendBatch_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{{Slices: orders("x")}}}},
	{logstorepb.LogStore_DeleteGroup_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.DeleteGroupRequest{Group: "g"}},
	{logstorepb.LogStore_NextEpoch_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.NextEpochRequest{}},
	{logstorepb.LogStore_ReportConsumer_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.ReportConsumerRequest{Consumer: "c", AckedLsn: 1}},
	{logstorepb.Cluster_AddVoter_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.AddVoterRequest{Id: "n9", RaftAddress: "127.0.0.1:1", ApiAddress: "127.0.0.1:2"}},
	{logstorepb.Cluster_RemoveServer_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.RemoveServerRequest{Id: "n1"}},
	{logstorepb.Cluster_TransferLeadership_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.TransferLeadershipRequest{Id: "n1"}},
	{logstorepb.Cluster_Backup_FullMethodName, "store", true, devcluster.NobodyIdentity, &logstorepb.BackupRequest{}},
	{logstorepb.PlayerGroup_ListRegisteredTargets_FullMethodName, "store", false, cli, &logstorepb.ListRegisteredTargetsRequest{}},
	{logstorepb.PlayerGroup_DescribeGroup_FullMethodName, "store", false, cli, &logstorepb.DescribeGroupRequest{Group: "g"}},
	{logstorepb.PlayerGroup_RegisterTarget_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.RegisterTargetRequest{Target: &logstorepb.RegisteredTarget{Id: "x", Address: "127.0.0.1:1", Topics: []string{"orders"}}}},
	{logstorepb.PlayerGroup_UnregisterTarget_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.UnregisterTargetRequest{Id: "x"}},
	{logstorepb.PlayerGroup_Heartbeat_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.GroupHeartbeatRequest{Group: "g", MemberId: "m"}},
	{logstorepb.PlayerGroup_LeaveGroup_FullMethodName, "store", false, devcluster.NobodyIdentity, &logstorepb.LeaveGroupRequest{Group: "g", MemberId: "m"}},
	{playerpb.PlayerAdmin_ListTargets_FullMethodName, "admin", false, cli, &playerpb.ListTargetsRequest{}},
	{playerpb.PlayerAdmin_AddTarget_FullMethodName, "admin", false, devcluster.NobodyIdentity, &playerpb.AddTargetRequest{}},
	{playerpb.PlayerAdmin_RemoveTarget_FullMethodName, "admin", false, devcluster.NobodyIdentity, &playerpb.RemoveTargetRequest{Id: "shard-0"}},
	{targetpb.Target_Deliver_FullMethodName, "shard", true, devcluster.NobodyIdentity, &targetpb.DeliverRequest{}},
	{shardpb.Shard_Get_FullMethodName, "shard", false, cli, &shardpb.GetRequest{Key: []byte("k")}},
	{shardpb.Shard_Scan_FullMethodName, "shard", false, cli, &shardpb.ScanRequest{Limit: 1}},
	{shardpb.Shard_WaitApplied_FullMethodName, "shard", false, cli, &shardpb.WaitAppliedRequest{Lsn: 0}},
}

// FuzzRequestDecoding sends raw bytes as the request of every RPC of a
// live secure dev cluster: the server never panics (it runs in this
// process), every error is a gRPC status with a code the API defines (a
// decoding failure is INTERNAL from gRPC's codec; anything the handlers or
// the authorizer refuse carries an ErrorDetail) and the cluster's state is
// unchanged. `go test` runs the seed corpus (every method's valid request,
// and some garbage); `go test -fuzz FuzzRequestDecoding ./devcluster/`
// explores.
func FuzzRequestDecoding(f *testing.F) {
	for i, m := range fuzzMethods {
		valid, err := proto.Marshal(m.seed)
		if err != nil {
			f.Fatal(err)
		}
		for _, in := range [][]byte{valid, {0xff}, {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, {0x08}, append(valid, 0x80), []byte(strings.Repeat("\x12\x01a", 64))} {
			f.Add(uint8(i), in)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Second)
	defer cancel()
	sc := startSecure(f, ctx)
	f.Fuzz(func(t *testing.T, i uint8, in []byte) {
		m := fuzzMethods[int(i)%len(fuzzMethods)]
		cc := map[string]map[string]*grpc.ClientConn{"store": sc.store, "admin": sc.admin, "shard": sc.shard0}[m.server][m.as]
		before := sc.state(ctx, t)
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		err := rawCall(cctx, cc, m, in)
		ccancel()
		if err != nil {
			st, ok := status.FromError(err)
			switch {
			case !ok:
				t.Fatalf("%s(%x): not a gRPC status: %v", m.name, in, err)
			case st.Code() == codes.Internal && strings.Contains(st.Message(), "unmarshal"):
			case st.Code() == codes.DeadlineExceeded && m.stream: // a valid Read that follows the log
			case apierr.Detail(err) == nil:
				t.Fatalf("%s(%x): %v: no ErrorDetail (an untyped error)", m.name, in, err)
			}
		}
		if after := sc.state(ctx, t); after != before {
			t.Fatalf("%s(%x) changed the cluster: %s -> %s", m.name, in, before, after)
		}
	})
}

// rawCall sends in as m's request and reads one response.
func rawCall(ctx context.Context, cc *grpc.ClientConn, m fuzzMethod, in []byte) error {
	codec := grpc.ForceCodec(rawCodec{})
	var out []byte
	if !m.stream {
		return cc.Invoke(ctx, m.name, &in, &out, codec)
	}
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, m.name, codec)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&in); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if err := s.RecvMsg(&out); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
