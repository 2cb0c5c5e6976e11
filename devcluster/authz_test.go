package devcluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/devcluster"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/security"
	"github.com/logplayer/logplayer/shard"
)

// anonymous is a TLS client with no certificate and no token.
const anonymous = "(no identity)"

// identities of the matrix: devcluster's fixed ones, the CLI token, and
// anonymous.
var identities = []string{
	devcluster.PlayerIdentity, devcluster.AdminIdentity, devcluster.ProducerIdentity,
	devcluster.ConsumerIdentity, devcluster.NobodyIdentity, devcluster.CLIToken, anonymous,
}

// secureCluster is a devcluster with Secure on and a connection per
// identity to the leader, the admin API and target shard-0.
type secureCluster struct {
	*devcluster.Cluster
	store, admin, shard0 map[string]*grpc.ClientConn
}

func startSecure(t testing.TB, ctx context.Context) *secureCluster {
	t.Helper()
	c, err := devcluster.Start(ctx, devcluster.Config{Logger: logstoretest.QuietLogger(), Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	st, err := c.Client.LeaderStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "the LogPlayer's epoch and targets", func() bool {
		return c.Player.Epoch() > 0 && len(c.Player.Targets()) == len(c.Targets)
	})
	sc := &secureCluster{Cluster: c, store: map[string]*grpc.ClientConn{}, admin: map[string]*grpc.ClientConn{}, shard0: map[string]*grpc.ClientConn{}}
	for _, id := range identities {
		sc.store[id] = dialAs(t, c, id, st.LeaderAddress)
		sc.admin[id] = dialAs(t, c, id, c.AdminAddr())
		sc.shard0[id] = dialAs(t, c, id, c.Targets[0].Addr())
	}
	return sc
}

func dialAs(t testing.TB, c *devcluster.Cluster, id, addr string) *grpc.ClientConn {
	t.Helper()
	var opts []grpc.DialOption
	var err error
	if id == anonymous {
		opts, err = security.GRPCDialOptions(security.ClientSettings{TLS: security.ClientOptions{Files: security.Files{CAFile: c.TLSFiles(id).CAFile}}})
	} else {
		opts, err = c.DialOptions(id)
	}
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// rpc is one call of the matrix, harmless when allowed (unknown ids,
// invalid requests, empty groups) except NextEpoch, which runs last.
type rpc struct {
	name    string
	allowed []string // identities allowed; the others are denied
	write   bool     // a state-changing RPC: a denial must change nothing
	call    func(ctx context.Context, sc *secureCluster, id string) error
}

func recvOnce[T any](s interface{ Recv() (T, error) }, err error) error {
	if err != nil {
		return err
	}
	if _, err := s.Recv(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func orders(v string) []*logstorepb.Slice {
	return []*logstorepb.Slice{{Topic: demo.OrdersTopic, Messages: []*logstorepb.Message{{Value: []byte(v)}}}}
}

const (
	player, admin, producer, consumer, cli = devcluster.PlayerIdentity, devcluster.AdminIdentity,
		devcluster.ProducerIdentity, devcluster.ConsumerIdentity, devcluster.CLIToken
)

var everyIdentity = []string{player, admin, producer, consumer, devcluster.NobodyIdentity, cli}

var matrix = []rpc{
	{"LogStore.Append", []string{producer, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).Append(ctx, &logstorepb.AppendRequest{Slices: orders("m-" + id)})
		return err
	}},
	{"LogStore.AppendBatch", []string{producer, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{{Slices: orders("b-" + id)}}})
		return err
	}},
	{"LogStore.Append(offset commit)", []string{consumer, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).Append(ctx, &logstorepb.AppendRequest{
			OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g-matrix", Topic: demo.OrdersTopic, Offset: 1}}})
		return err
	}},
	{"LogStore.Read", []string{player, consumer, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		return recvOnce(logstorepb.NewLogStoreClient(sc.store[id]).Read(ctx, &logstorepb.ReadRequest{FromLsn: 1, ToLsn: 1, Topics: []string{demo.OrdersTopic}}))
	}},
	{"LogStore.ReadTopic", []string{player, consumer, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		return recvOnce(logstorepb.NewLogStoreClient(sc.store[id]).ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: demo.OrdersTopic, MaxMessages: 1}))
	}},
	{"LogStore.FetchOffsets", []string{consumer, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).FetchOffsets(ctx, &logstorepb.FetchOffsetsRequest{Group: "g-matrix"})
		return err
	}},
	{"LogStore.DeleteGroup", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).DeleteGroup(ctx, &logstorepb.DeleteGroupRequest{Group: "g-none"})
		return err
	}},
	{"LogStore.ReportConsumer", []string{player}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).ReportConsumer(ctx, &logstorepb.ReportConsumerRequest{Consumer: "matrix", AckedLsn: 1, Remove: true})
		return err
	}},
	{"LogStore.Status", everyIdentity, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).Status(ctx, &logstorepb.StatusRequest{})
		return err
	}},
	// PlayerGroup: writes with unknown ids or invalid requests (refused by
	// the handler after the authorizer let them through: no change).
	{"PlayerGroup.RegisterTarget", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewPlayerGroupClient(sc.store[id]).RegisterTarget(ctx, &logstorepb.RegisterTargetRequest{})
		return err
	}},
	{"PlayerGroup.UnregisterTarget", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewPlayerGroupClient(sc.store[id]).UnregisterTarget(ctx, &logstorepb.UnregisterTargetRequest{Id: "matrix-none"})
		return err
	}},
	{"PlayerGroup.ListRegisteredTargets", everyIdentity, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewPlayerGroupClient(sc.store[id]).ListRegisteredTargets(ctx, &logstorepb.ListRegisteredTargetsRequest{})
		return err
	}},
	{"PlayerGroup.Heartbeat", []string{player}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewPlayerGroupClient(sc.store[id]).Heartbeat(ctx, &logstorepb.GroupHeartbeatRequest{Group: "matrix"})
		return err
	}},
	{"PlayerGroup.LeaveGroup", []string{player}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewPlayerGroupClient(sc.store[id]).LeaveGroup(ctx, &logstorepb.LeaveGroupRequest{Group: "matrix", MemberId: "none"})
		return err
	}},
	{"PlayerGroup.DescribeGroup", everyIdentity, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewPlayerGroupClient(sc.store[id]).DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{Group: "matrix"})
		return err
	}},
	{"Cluster.AddVoter", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewClusterClient(sc.store[id]).AddVoter(ctx, &logstorepb.AddVoterRequest{})
		return err
	}},
	{"Cluster.RemoveServer", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewClusterClient(sc.store[id]).RemoveServer(ctx, &logstorepb.RemoveServerRequest{Id: "n-none"})
		return err
	}},
	{"Cluster.TransferLeadership", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewClusterClient(sc.store[id]).TransferLeadership(ctx, &logstorepb.TransferLeadershipRequest{Id: "n-none"})
		return err
	}},
	{"Cluster.Backup", []string{admin, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		st, err := logstorepb.NewClusterClient(sc.store[id]).Backup(ctx, &logstorepb.BackupRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}},
	{"PlayerAdmin.AddTarget", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := playerpb.NewPlayerAdminClient(sc.admin[id]).AddTarget(ctx, &playerpb.AddTargetRequest{})
		return err
	}},
	{"PlayerAdmin.RemoveTarget", []string{admin, cli}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := playerpb.NewPlayerAdminClient(sc.admin[id]).RemoveTarget(ctx, &playerpb.RemoveTargetRequest{Id: "t-none"})
		return err
	}},
	{"PlayerAdmin.ListTargets", []string{admin, player, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := playerpb.NewPlayerAdminClient(sc.admin[id]).ListTargets(ctx, &playerpb.ListTargetsRequest{})
		return err
	}},
	{"Target.Deliver", []string{player}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		return deliverHello(ctx, sc.shard0[id], 1)
	}},
	{"Shard.Get", []string{consumer, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := shardpb.NewShardClient(sc.shard0[id]).Get(ctx, &shardpb.GetRequest{Key: []byte("k")})
		return err
	}},
	{"Shard.Scan", []string{consumer, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := shardpb.NewShardClient(sc.shard0[id]).Scan(ctx, &shardpb.ScanRequest{Limit: 1})
		return err
	}},
	{"Shard.WaitApplied", []string{consumer, cli}, false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := shardpb.NewShardClient(sc.shard0[id]).WaitApplied(ctx, &shardpb.WaitAppliedRequest{Lsn: 0})
		return err
	}},
	{"Health.Check", append([]string{anonymous}, everyIdentity...), false, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := healthpb.NewHealthClient(sc.store[id]).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}},
	// Last: the player's allowed call fences the cluster's own LogPlayer.
	{"LogStore.NextEpoch", []string{player}, true, func(ctx context.Context, sc *secureCluster, id string) error {
		_, err := logstorepb.NewLogStoreClient(sc.store[id]).NextEpoch(ctx, &logstorepb.NextEpochRequest{})
		return err
	}},
}

// deliverHello opens a Deliver stream, says Hello with epoch and waits for
// the answer.
func deliverHello(ctx context.Context, cc *grpc.ClientConn, epoch uint64) error {
	s, err := targetpb.NewTargetClient(cc).Deliver(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(&targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Hello{Hello: &targetpb.Hello{
		PlayerId: "matrix", Epoch: epoch, TargetId: "shard-0", ProtocolVersion: targetpb.ProtocolVersion_PROTOCOL_VERSION_1, Session: 1,
	}}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = s.Recv()
	return err
}

// clusterState is what a denied write must leave alone.
func (sc *secureCluster) state(ctx context.Context, t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := sc.Client.LeaderStatus(ctx)
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	var servers, consumers, targets []string
	for _, s := range st.Servers {
		servers = append(servers, s.Id)
	}
	for _, c := range st.Consumers { // the real LogPlayer reports its targets'
		if c.Consumer == "matrix" {
			consumers = append(consumers, c.Consumer)
		}
	}
	for _, ts := range sc.Player.Targets() {
		targets = append(targets, ts.ID)
	}
	sort.Strings(targets)
	return fmt.Sprintf("head %d epoch %d leader %s servers %v consumers %v targets %v",
		st.HeadLsn, st.Epoch, st.LeaderId, servers, consumers, targets)
}

// TestRoleMatrix: every RPC of every server (LogStore, Cluster,
// PlayerAdmin, Target, Shard, health) called by every identity of the dev
// policy, a token, and a TLS client with no identity: the allowed ones are
// not refused, the others get PERMISSION_DENIED (UNAUTHENTICATED without
// an identity) with the typed detail, and a denied write changes nothing.
func TestRoleMatrix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	sc := startSecure(t, ctx)
	if _, err := sc.Client.Append(ctx, &logstorepb.AppendRequest{Slices: orders("first")}); err != nil {
		t.Fatal(err)
	}
	for _, r := range matrix {
		for _, id := range identities {
			before := ""
			allowed := slices.Contains(r.allowed, id)
			if r.write && !allowed {
				before = sc.state(ctx, t)
			}
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			err := r.call(cctx, sc, id)
			ccancel()
			code := status.Code(err)
			refused := code == codes.PermissionDenied || code == codes.Unauthenticated
			switch {
			case allowed && refused:
				t.Errorf("%s as %s: refused (%v), want allowed", r.name, id, err)
			case !allowed && id == anonymous && (code != codes.Unauthenticated || apierr.CodeOf(err) != logstorepb.ErrorCode_UNAUTHENTICATED):
				t.Errorf("%s with no identity: %v, want UNAUTHENTICATED with its detail", r.name, err)
			case !allowed && id != anonymous && (code != codes.PermissionDenied || apierr.CodeOf(err) != logstorepb.ErrorCode_PERMISSION_DENIED):
				t.Errorf("%s as %s: %v, want PERMISSION_DENIED with its detail", r.name, id, err)
			}
			if before != "" {
				if after := sc.state(ctx, t); after != before {
					t.Errorf("%s as %s was denied but changed the cluster: %s -> %s", r.name, id, before, after)
				}
			}
		}
	}
	// Plaintext against the TLS port: refused, with the reason.
	pc, err := grpc.NewClient(sc.StoreAddrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, err = logstorepb.NewLogStoreClient(pc).Status(ctx, &logstorepb.StatusRequest{})
	if err == nil || !strings.Contains(err.Error(), "requires TLS") {
		t.Fatalf("plaintext status: %v, want a refusal saying TLS is required", err)
	}
}

// TestConsumerReadsOnlyItsSlices: a consumer allowed some topics reading
// the whole log (no topic filter) gets only its slices of a multi-topic
// transaction, and the stream still reports how far it read.
func TestConsumerReadsOnlyItsSlices(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sc := startSecure(t, ctx)
	resp, err := sc.Client.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: demo.OrdersTopic, Messages: []*logstorepb.Message{{Value: []byte("o")}}},
		{Topic: demo.InventoryTopic, Messages: []*logstorepb.Message{{Value: []byte("i")}}},
		{Topic: "shard-1", Messages: []*logstorepb.Message{{Key: []byte("k"), Value: shard.EncodePut([]byte("k"), []byte("v"))}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := sc.Client.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: demo.InventoryTopic, Messages: []*logstorepb.Message{{Value: []byte("only inventory")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := logstorepb.NewLogStoreClient(sc.store[consumer]).Read(ctx, &logstorepb.ReadRequest{FromLsn: resp.Lsn, ToLsn: hidden.Lsn})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var through uint64
	for through < hidden.Lsn {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("read as consumer: %v (through %d)", err, through)
		}
		for _, txn := range r.Transactions {
			for _, s := range txn.Slices {
				got = append(got, fmt.Sprintf("%d:%s", txn.Lsn, s.Topic))
			}
		}
		through = r.ReadThroughLsn
	}
	if want := []string{fmt.Sprintf("%d:%s", resp.Lsn, demo.OrdersTopic)}; !slices.Equal(got, want) {
		t.Fatalf("consumer read %v, want only %v (its topics %v)", got, want, devcluster.ConsumerTopics)
	}
}

// TestRogueLogPlayer: a LogPlayer whose certificate is valid but lacks the
// player role cannot take an epoch, and cannot deliver to a target even
// with an epoch above the real one's; the real LogPlayer keeps
// delivering.
func TestRogueLogPlayer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sc := startSecure(t, ctx)
	rogueOpts, err := sc.DialOptions(producer)
	if err != nil {
		t.Fatal(err)
	}
	var tcs []logplayer.TargetConfig
	for _, tg := range sc.Targets {
		tcs = append(tcs, logplayer.TargetConfig{ID: tg.ID, Address: tg.Addr(), Topics: tg.Topics})
	}
	before := sc.state(ctx, t)
	rogue, err := logplayer.New(logplayer.Config{PlayerID: "rogue", LogStore: sc.StoreAddrs, Targets: tcs, DialOptions: rogueOpts, Logger: logstoretest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	if err := rogue.Run(ctx); status.Code(errors.Unwrap(err)) != codes.PermissionDenied && apierr.CodeOf(err) != logstorepb.ErrorCode_PERMISSION_DENIED {
		t.Fatalf("rogue LogPlayer's Run: %v, want PERMISSION_DENIED on its epoch", err)
	}
	if err := deliverHello(ctx, sc.shard0[producer], 1<<40); apierr.CodeOf(err) != logstorepb.ErrorCode_PERMISSION_DENIED {
		t.Fatalf("rogue Deliver with a higher epoch: %v, want PERMISSION_DENIED", err)
	}
	if after := sc.state(ctx, t); after != before {
		t.Fatalf("the rogue changed the cluster: %s -> %s", before, after)
	}
	appendAndWaitAck(t, ctx, sc.Cluster, "shard-0", "after the rogue")
}
