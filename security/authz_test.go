package security

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
)

// protoServices are the services of proto/*.proto.
func protoServices() []protoreflect.ServiceDescriptor {
	var out []protoreflect.ServiceDescriptor
	for _, f := range []protoreflect.FileDescriptor{
		logstorepb.File_logstore_proto, playerpb.File_player_proto,
		targetpb.File_target_proto, shardpb.File_shard_proto,
	} {
		for i := 0; i < f.Services().Len(); i++ {
			out = append(out, f.Services().Get(i))
		}
	}
	return out
}

func fullMethod(m protoreflect.MethodDescriptor) string {
	return "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
}

func eachMethod(services []protoreflect.ServiceDescriptor, f func(protoreflect.MethodDescriptor)) {
	for _, s := range services {
		for i := 0; i < s.Methods().Len(); i++ {
			f(s.Methods().Get(i))
		}
	}
}

// Every RPC of every proto has a rule, and the table has nothing else but
// the standard health and reflection services.
func TestMethodTableCoversProtos(t *testing.T) {
	inProtos := map[string]bool{}
	eachMethod(protoServices(), func(m protoreflect.MethodDescriptor) {
		inProtos[fullMethod(m)] = true
		if _, ok := methods[fullMethod(m)]; !ok {
			t.Errorf("%s has no rule in the security method table (methods.go): it would be refused to everyone", fullMethod(m))
		}
	})
	for name := range methods {
		if !inProtos[name] && !strings.HasPrefix(name, "/grpc.health.v1.") && !strings.HasPrefix(name, "/grpc.reflection.") {
			t.Errorf("method table names %s, which no proto defines", name)
		}
	}
}

// calls records which stub handlers ran.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[m]++
}

func (c *calls) count(m string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[m]
}

func newMessage(d protoreflect.MessageDescriptor) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		panic(err)
	}
	return mt.New().Interface()
}

// readAnswer is what the stub Read handler sends: a transaction of two
// topics, and one of a topic the consumer may not read.
func readAnswer() *logstorepb.ReadResponse {
	return &logstorepb.ReadResponse{ReadThroughLsn: 9, Transactions: []*logstorepb.Transaction{
		{Lsn: 8, Slices: []*logstorepb.TxnSlice{{Topic: "orders"}, {Topic: "payments"}},
			OffsetCommits: []*logstorepb.OffsetCommit{{Group: "billing", Topic: "orders"}, {Group: "x", Topic: "payments"}}},
		{Lsn: 9, Slices: []*logstorepb.TxnSlice{{Topic: "payments"}}},
	}}
}

// stubService is a gRPC service for sd whose every handler records the
// call and answers an empty response (Read answers readAnswer).
func stubService(sd protoreflect.ServiceDescriptor, c *calls) *grpc.ServiceDesc {
	desc := &grpc.ServiceDesc{ServiceName: string(sd.FullName()), HandlerType: (*any)(nil)}
	for i := 0; i < sd.Methods().Len(); i++ {
		md := sd.Methods().Get(i)
		name := fullMethod(md)
		if !md.IsStreamingClient() && !md.IsStreamingServer() {
			desc.Methods = append(desc.Methods, grpc.MethodDesc{
				MethodName: string(md.Name()),
				Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
					in := newMessage(md.Input())
					if err := dec(in); err != nil {
						return nil, err
					}
					h := func(context.Context, any) (any, error) { c.add(name); return newMessage(md.Output()), nil }
					if ic == nil {
						return h(ctx, in)
					}
					return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: name}, h)
				},
			})
			continue
		}
		desc.Streams = append(desc.Streams, grpc.StreamDesc{
			StreamName: string(md.Name()), ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient(),
			Handler: func(_ any, ss grpc.ServerStream) error {
				if err := ss.RecvMsg(newMessage(md.Input())); err != nil {
					return err
				}
				c.add(name)
				var out proto.Message = newMessage(md.Output())
				if name == logstorepb.LogStore_Read_FullMethodName {
					out = readAnswer()
				}
				return ss.SendMsg(out)
			},
		})
	}
	return desc
}

// matrixServer serves every proto service (and health) with stub handlers
// behind the real interceptors, over TLS that requests client certificates.
type matrixServer struct {
	addr  string
	pki   *pki
	calls *calls
	log   logs
	// tokens of token identities; certs of certificate identities.
	tokens map[string]string
	certs  map[string]Files
}

const matrixPolicy = `{"grants": [
  {"identity": "producer-1", "role": "producer", "topics": ["orders", "shard-*"]},
  {"identity": "consumer-1", "role": "consumer", "topics": ["orders"], "groups": ["billing"]},
  {"identity": "player", "role": "player"},
  {"identity": "admin", "role": "admin"},
  {"identity": "admin-by-token", "role": "admin"}
]}`

func newMatrixServer(t *testing.T) *matrixServer {
	t.Helper()
	s := &matrixServer{pki: newPKI(t, "ca"), calls: &calls{n: map[string]int{}}, tokens: map[string]string{}, certs: map[string]Files{}}
	policyPath := filepath.Join(s.pki.dir, "policy.json")
	if err := os.WriteFile(policyPath, []byte(matrixPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	var tokenFile []byte
	for _, id := range []string{"producer-1", "admin-by-token"} {
		tok, line, err := NewToken(id)
		if err != nil {
			t.Fatal(err)
		}
		s.tokens[id] = tok
		tokenFile = append(append(tokenFile, line...), '\n')
	}
	tokenPath := filepath.Join(s.pki.dir, "tokens.jsonl")
	if err := os.WriteFile(tokenPath, tokenFile, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"consumer-1", "player", "admin", "nobody"} {
		s.certs[id] = s.pki.issue(id, CertOptions{Client: true})
	}
	// The policy is checked on every call, so a test's edit applies to
	// the next one.
	policy, err := LoadPolicyFile(policyPath, ReloadOptions{Interval: -1})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokenFile(tokenPath, ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	authz, err := NewAuthorizer(Config{Policy: policy, Tokens: tokens, ShardTopics: []string{"orders"}, Log: s.log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := serverTLS(t, ServerOptions{Files: s.pki.node("n1"), ClientAuth: ClientAuthRequest})
	gs := grpc.NewServer(append(authz.ServerOptions(), grpc.Creds(GRPCServerCredentials(srvTLS, s.log.logger())))...)
	for _, sd := range append(protoServices(), healthpb.File_grpc_health_v1_health_proto.Services().Get(0)) {
		gs.RegisterService(stubService(sd, s.calls), struct{}{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	s.addr = ln.Addr().String()
	return s
}

// conn dials as identity ("" for none; a token identity sends its token,
// a certificate identity presents its certificate).
func (s *matrixServer) conn(t *testing.T, identity string) *grpc.ClientConn {
	t.Helper()
	files := Files{CAFile: s.pki.caFile()}
	if f, ok := s.certs[identity]; ok {
		files = f
	}
	opts := []grpc.DialOption{dialTLS(t, ClientOptions{Files: files})}
	if tok, ok := s.tokens[identity]; ok {
		opts = append(opts, grpc.WithPerRPCCredentials(BearerToken(tok)))
	} else if identity == "bad-token" {
		opts = append(opts, grpc.WithPerRPCCredentials(BearerToken("not-a-token")))
	}
	cc, err := grpc.NewClient(s.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// call invokes method with req (unary, or a stream's one request) and
// returns the first response.
func call(ctx context.Context, cc *grpc.ClientConn, md protoreflect.MethodDescriptor, req proto.Message) (proto.Message, error) {
	out := newMessage(md.Output())
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		return out, cc.Invoke(ctx, fullMethod(md), req, out)
	}
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, fullMethod(md))
	if err != nil {
		return nil, err
	}
	if err := st.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := st.CloseSend(); err != nil {
		return nil, err
	}
	if err := st.RecvMsg(out); err != nil {
		return nil, err
	}
	return out, nil
}

// sampleRequests are in-scope requests of the grants in matrixPolicy
// (topic orders, group billing); methods not here send an empty request.
var sampleRequests = map[string]proto.Message{
	logstorepb.LogStore_Append_FullMethodName: &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders"}}},
	logstorepb.LogStore_AppendBatch_FullMethodName: &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{
		{Slices: []*logstorepb.Slice{{Topic: "orders"}}}, {Slices: []*logstorepb.Slice{{Topic: "shard-3"}}}}},
	logstorepb.LogStore_Read_FullMethodName:         &logstorepb.ReadRequest{FromLsn: 1, Topics: []string{"orders"}},
	logstorepb.LogStore_ReadTopic_FullMethodName:    &logstorepb.ReadTopicRequest{Topic: "orders"},
	logstorepb.LogStore_FetchOffsets_FullMethodName: &logstorepb.FetchOffsetsRequest{Group: "billing"},
	logstorepb.LogStore_DeleteGroup_FullMethodName:  &logstorepb.DeleteGroupRequest{Group: "billing"},
}

// allowed is the role matrix, written out independently of methods.go:
// which identities may call each RPC with its sample request. "*" is every
// authenticated identity, "-" also the anonymous caller.
var allowed = map[string][]string{
	logstorepb.LogStore_Append_FullMethodName:                   {"producer-1"},
	logstorepb.LogStore_AppendBatch_FullMethodName:              {"producer-1"},
	logstorepb.LogStore_Read_FullMethodName:                     {"consumer-1", "player"},
	logstorepb.LogStore_ReadTopic_FullMethodName:                {"consumer-1", "player"},
	logstorepb.LogStore_FetchOffsets_FullMethodName:             {"consumer-1"},
	logstorepb.LogStore_DeleteGroup_FullMethodName:              {"admin", "admin-by-token"},
	logstorepb.LogStore_NextEpoch_FullMethodName:                {"player"},
	logstorepb.LogStore_ReportConsumer_FullMethodName:           {"player"},
	logstorepb.LogStore_Status_FullMethodName:                   {"*"},
	logstorepb.LogStore_CreateTopic_FullMethodName:              {"admin", "admin-by-token"},
	logstorepb.LogStore_DescribeTopic_FullMethodName:            {"*"},
	logstorepb.LogStore_ListTopics_FullMethodName:               {"*"},
	logstorepb.LogStore_InitProducer_FullMethodName:             {"producer-1", "consumer-1"},
	logstorepb.Cluster_AddVoter_FullMethodName:                  {"admin", "admin-by-token"},
	logstorepb.Cluster_RemoveServer_FullMethodName:              {"admin", "admin-by-token"},
	logstorepb.Cluster_TransferLeadership_FullMethodName:        {"admin", "admin-by-token"},
	logstorepb.Cluster_Backup_FullMethodName:                    {"admin", "admin-by-token"},
	logstorepb.PlayerGroup_RegisterTarget_FullMethodName:        {"admin", "admin-by-token"},
	logstorepb.PlayerGroup_UnregisterTarget_FullMethodName:      {"admin", "admin-by-token"},
	logstorepb.PlayerGroup_ListRegisteredTargets_FullMethodName: {"*"},
	logstorepb.PlayerGroup_Heartbeat_FullMethodName:             {"player"},
	logstorepb.PlayerGroup_LeaveGroup_FullMethodName:            {"player"},
	logstorepb.PlayerGroup_DescribeGroup_FullMethodName:         {"*"},
	playerpb.PlayerAdmin_AddTarget_FullMethodName:               {"admin", "admin-by-token"},
	playerpb.PlayerAdmin_RemoveTarget_FullMethodName:            {"admin", "admin-by-token"},
	playerpb.PlayerAdmin_ListTargets_FullMethodName:             {"admin", "admin-by-token", "player"},
	targetpb.Target_Deliver_FullMethodName:                      {"player"},
	targetpb.Target_Snapshot_FullMethodName:                     {"admin", "admin-by-token", "player"},
	targetpb.Target_Restore_FullMethodName:                      {"admin", "admin-by-token"},
	shardpb.Shard_Get_FullMethodName:                            {"consumer-1"},
	shardpb.Shard_Scan_FullMethodName:                           {"consumer-1"},
	shardpb.Shard_WaitApplied_FullMethodName:                    {"consumer-1"},
	healthpb.Health_Check_FullMethodName:                        {"-"},
	healthpb.Health_List_FullMethodName:                         {"-"},
	healthpb.Health_Watch_FullMethodName:                        {"-"},
}

// Every RPC × every identity (each role, a token identity, one with no
// grant, a bad token, none): allowed calls reach the handler; refused
// calls get UNAUTHENTICATED or PERMISSION_DENIED with the same ErrorDetail
// code and never reach the handler.
func TestRoleMatrix(t *testing.T) {
	s := newMatrixServer(t)
	identities := []string{"", "bad-token", "nobody", "producer-1", "consumer-1", "player", "admin", "admin-by-token"}
	services := append(protoServices(), healthpb.File_grpc_health_v1_health_proto.Services().Get(0))
	conns := map[string]*grpc.ClientConn{}
	for _, id := range identities {
		conns[id] = s.conn(t, id)
	}
	eachMethod(services, func(md protoreflect.MethodDescriptor) {
		name := fullMethod(md)
		who, ok := allowed[name]
		if !ok {
			t.Errorf("%s is missing from the test's role matrix", name)
			return
		}
		req, ok := sampleRequests[name]
		if !ok {
			req = newMessage(md.Input())
		}
		for _, id := range identities {
			authenticated := id != "" && id != "bad-token"
			want := slices.Contains(who, id) || slices.Contains(who, "-") || (authenticated && slices.Contains(who, "*"))
			before := s.calls.count(name)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := call(ctx, conns[id], md, req)
			cancel()
			ran := s.calls.count(name) - before
			switch {
			case want && (err != nil || ran != 1):
				t.Errorf("%s as %q: %v (handler ran %d times), want allowed", name, id, err, ran)
			case !want:
				wantCode, wantEC := codes.PermissionDenied, logstorepb.ErrorCode_PERMISSION_DENIED
				if !authenticated {
					wantCode, wantEC = codes.Unauthenticated, logstorepb.ErrorCode_UNAUTHENTICATED
				}
				if status.Code(err) != wantCode || apierr.CodeOf(err) != wantEC || ran != 0 {
					t.Errorf("%s as %q: %v / %v (handler ran %d times), want %v with detail %v and no handler", name, id, status.Code(err), apierr.CodeOf(err), ran, wantCode, wantEC)
				}
			}
		}
	})
}

// Patterns decide within a role: the refused topic or group is in the
// detail, and nothing reaches the handler.
func TestPatternRefusals(t *testing.T) {
	s := newMatrixServer(t)
	ls := func(id string) logstorepb.LogStoreClient { return logstorepb.NewLogStoreClient(s.conn(t, id)) }
	ctx := context.Background()
	producer, consumer := ls("producer-1"), ls("consumer-1")

	for _, tc := range []struct {
		name         string
		err          error
		topic, group string
	}{
		{"append to another topic", func() error {
			_, err := producer.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders"}, {Topic: "payments"}}})
			return err
		}(), "payments", ""},
		{"producer commits a group's offset", func() error {
			_, err := producer.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders"}},
				OffsetCommits: []*logstorepb.OffsetCommit{{Group: "billing", Topic: "orders", Offset: 1}}})
			return err
		}(), "", "billing"},
		{"batch with one refused request", func() error {
			_, err := producer.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{
				{Slices: []*logstorepb.Slice{{Topic: "orders"}}}, {Slices: []*logstorepb.Slice{{Topic: "payments"}}}}})
			return err
		}(), "payments", ""},
		{"group condition of another group", func() error {
			_, err := producer.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders"}},
				Conditions: []*logstorepb.Condition{{Topic: "orders", Group: "billing"}}})
			return err
		}(), "", "billing"},
		{"consumer commits another group", func() error {
			_, err := consumer.Append(ctx, &logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{{Group: "audit", Topic: "orders"}}})
			return err
		}(), "", "audit"},
		{"consumer fetches another group", func() error {
			_, err := consumer.FetchOffsets(ctx, &logstorepb.FetchOffsetsRequest{Group: "audit"})
			return err
		}(), "", "audit"},
		{"consumer reads another topic", func() error {
			st, err := consumer.ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: "payments"})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}(), "payments", ""},
		{"consumer filters on another topic", func() error {
			st, err := consumer.Read(ctx, &logstorepb.ReadRequest{FromLsn: 1, Topics: []string{"orders", "payments"}})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}(), "payments", ""},
	} {
		d := apierr.Detail(tc.err)
		if status.Code(tc.err) != codes.PermissionDenied || d == nil || d.Code != logstorepb.ErrorCode_PERMISSION_DENIED || d.Topic != tc.topic || d.Group != tc.group {
			t.Errorf("%s: %v, detail %v; want PERMISSION_DENIED with topic %q group %q", tc.name, tc.err, d, tc.topic, tc.group)
		}
		if strings.Contains(tc.err.Error(), "\n") {
			t.Errorf("%s: message is not one line: %q", tc.name, tc.err)
		}
	}
	for _, m := range []string{logstorepb.LogStore_Append_FullMethodName, logstorepb.LogStore_AppendBatch_FullMethodName,
		logstorepb.LogStore_FetchOffsets_FullMethodName, logstorepb.LogStore_ReadTopic_FullMethodName, logstorepb.LogStore_Read_FullMethodName} {
		if n := s.calls.count(m); n != 0 {
			t.Errorf("%s handler ran %d times for refused calls", m, n)
		}
	}

	// Allowed within the patterns: a consumer's read-process-write commit
	// of its own group.
	if _, err := consumer.Append(ctx, &logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{{Group: "billing", Topic: "orders"}}}); err != nil {
		t.Errorf("consumer commits its group: %v", err)
	}
}

// A consumer reading every topic (no filter) gets only the slices of
// topics it may read; read_through_lsn still says how far it read. A
// player gets everything.
func TestReadIsFilteredForConsumers(t *testing.T) {
	s := newMatrixServer(t)
	ctx := context.Background()
	read := func(id string) *logstorepb.ReadResponse {
		st, err := logstorepb.NewLogStoreClient(s.conn(t, id)).Read(ctx, &logstorepb.ReadRequest{FromLsn: 1})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("read as %s: %v", id, err)
		}
		return resp
	}
	got := read("consumer-1")
	want := &logstorepb.ReadResponse{ReadThroughLsn: 9, Transactions: []*logstorepb.Transaction{
		{Lsn: 8, Slices: []*logstorepb.TxnSlice{{Topic: "orders"}}, OffsetCommits: []*logstorepb.OffsetCommit{{Group: "billing", Topic: "orders"}}},
	}}
	if !proto.Equal(got, want) {
		t.Fatalf("consumer read %v, want %v", got, want)
	}
	if got := read("player"); !proto.Equal(got, readAnswer()) {
		t.Fatalf("player read %v, want everything", got)
	}
}

// A per-topic check for handlers: AccessFrom in a handler's context.
func TestAccessCanReadTopic(t *testing.T) {
	p, err := ParsePolicy([]byte(matrixPolicy))
	if err != nil {
		t.Fatal(err)
	}
	consumer := newAccess(Identity{Name: "consumer-1"}, p.grantsFor("consumer-1"))
	player := newAccess(Identity{Name: "player"}, p.grantsFor("player"))
	var off *Access
	if !consumer.CanReadTopic("orders") || consumer.CanReadTopic("payments") || consumer.ReadsAllTopics() {
		t.Fatal("consumer-1 should read orders only")
	}
	if !player.CanReadTopic("payments") || !player.ReadsAllTopics() {
		t.Fatal("a player reads every topic")
	}
	if !off.CanReadTopic("anything") || !off.ReadsAllTopics() {
		t.Fatal("with security off (nil Access) everything is readable")
	}
	if AccessFrom(context.Background()) != nil {
		t.Fatal("AccessFrom of a bare context is not nil")
	}
}

// Bearer tokens: a token is never sent, nor accepted, without TLS.
func TestBearerTokenNeedsTLS(t *testing.T) {
	_, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(BearerToken("t")))
	if err == nil || !strings.Contains(err.Error(), "transport") {
		t.Fatalf("dial plaintext with a bearer token: %v, want refused", err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer x"))
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
	if _, _, err := (&Authorizer{}).authenticate(ctx); !errors.Is(err, errTokenOverPlain) {
		t.Fatalf("server side, token over plaintext: %v, want errTokenOverPlain", err)
	}
	ctx = metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Basic x"))
	if _, _, err := (&Authorizer{}).authenticate(ctx); !errors.Is(err, errMalformedBearer) {
		t.Fatalf("Basic auth: %v, want errMalformedBearer", err)
	}
}

// A policy edit applies to the next call, without a restart.
func TestPolicyEditTakesEffect(t *testing.T) {
	s := newMatrixServer(t)
	admin := logstorepb.NewClusterClient(s.conn(t, "admin"))
	ctx := context.Background()
	if _, err := admin.TransferLeadership(ctx, &logstorepb.TransferLeadershipRequest{}); err != nil {
		t.Fatalf("admin before the edit: %v", err)
	}
	path := filepath.Join(s.pki.dir, "policy.json")
	if err := writeAtomic(path, []byte(strings.Replace(matrixPolicy, `"identity": "admin", "role": "admin"`, `"identity": "admin", "role": "player"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.TransferLeadership(ctx, &logstorepb.TransferLeadershipRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("admin after the policy took the role away: %v, want PERMISSION_DENIED", err)
	}
}

// BenchmarkAuthorizeAppend is the interceptor's cost on the hot path: a
// token identity's Append of two topics (authenticate, grants, check).
func BenchmarkAuthorizeAppend(b *testing.B) {
	dir := b.TempDir()
	tok, line, err := NewToken("producer-1")
	if err != nil {
		b.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "t"), append(line, '\n'), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "p"), []byte(matrixPolicy), 0o600)
	pf, _ := LoadPolicyFile(filepath.Join(dir, "p"), ReloadOptions{})
	tf, _ := LoadTokenFile(filepath.Join(dir, "t"), ReloadOptions{})
	a, _ := NewAuthorizer(Config{Policy: pf, Tokens: tf})
	ic := a.UnaryInterceptor()
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{}, AuthInfo: credentials.TLSInfo{}})
	req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders"}, {Topic: "shard-7"}}}
	info := &grpc.UnaryServerInfo{FullMethod: logstorepb.LogStore_Append_FullMethodName}
	h := func(context.Context, any) (any, error) { return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ic(ctx, req, info, h); err != nil {
			b.Fatal(err)
		}
	}
}
