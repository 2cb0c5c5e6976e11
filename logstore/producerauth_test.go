package logstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/security"
)

// teamPolicy gives two teams the producer role on one topic, each bound
// to its own producer names.
const teamPolicy = `{"grants": [
  {"identity": "team-a", "role": "producer", "topics": ["orders"], "producers": ["a-*"]},
  {"identity": "team-b", "role": "producer", "topics": ["orders"], "producers": ["b-*"]},
  {"identity": "team-c", "role": "producer", "topics": ["orders"]}
]}`

// startSecureStore serves one node over TLS with policy (in the file it
// returns, which the server re-reads when it changes), and returns a
// LogStore client per identity (its client certificate).
func startSecureStore(t *testing.T, policy string, identities ...string) (map[string]logstorepb.LogStoreClient, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := security.WriteBundle(security.BundleOptions{Dir: dir, Nodes: []security.NodeSpec{{Name: "n0"}}, Clients: identities}); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policyFile, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	files := func(name string) security.Files {
		return security.Files{CAFile: filepath.Join(dir, security.CACertFile), CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	}
	opts, err := security.GRPCServerOptions(security.ServerSettings{
		TLS:        security.ServerOptions{Files: files("n0"), ClientAuth: security.ClientAuthRequest},
		PolicyFile: policyFile, Log: logstoretest.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := logstoretest.Start(t, 1, nil, opts...)
	out := map[string]logstorepb.LogStoreClient{}
	for _, id := range identities {
		dial, err := security.GRPCDialOptions(security.ClientSettings{TLS: security.ClientOptions{Files: files(id)}})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(c.Nodes[0].APIAddr(), dial...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		out[id] = logstorepb.NewLogStoreClient(cc)
	}
	return out, policyFile
}

// wantDeniedQuietly: err is PERMISSION_DENIED with its ErrorDetail, and
// says nothing of the other producer's state (epoch, sequence).
func wantDeniedQuietly(t *testing.T, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || apierr.CodeOf(err) != logstorepb.ErrorCode_PERMISSION_DENIED {
		t.Fatalf("%s: %v, want PERMISSION_DENIED with its ErrorDetail", what, err)
	}
	d := apierr.Detail(err)
	if d.Epoch != 0 || d.ExpectedSequence != 0 {
		t.Fatalf("%s: the refusal tells another producer's state: %v", what, d)
	}
	if msg := status.Convert(err).Message(); strings.Contains(msg, "epoch") || strings.Contains(msg, "sequence") {
		t.Fatalf("%s: the refusal tells another producer's state: %q", what, msg)
	}
}

// A producer name belongs to the identities the policy binds it to: team
// A may neither register team B's name (which would fence B) nor append
// with B's producer id (which would use up B's sequences), and the
// refusals tell A nothing of B's epoch or sequence.
func TestProducerNamesBoundToIdentities(t *testing.T) {
	ls, _ := startSecureStore(t, teamPolicy, "team-a", "team-b", "team-c")
	ctx := context.Background()
	orders := []*logstorepb.Slice{{Topic: "orders", Messages: []*logstorepb.Message{{Value: []byte("x")}}}}
	b, err := ls["team-b"].InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "b-orders"})
	if err != nil {
		t.Fatal(err)
	}
	appendAs := func(who string, id string, epoch, seq uint64) error {
		_, err := ls[who].Append(ctx, &logstorepb.AppendRequest{Slices: orders, ProducerId: id, ProducerEpoch: epoch, Sequence: seq})
		return err
	}
	if err := appendAs("team-b", b.ProducerId, b.Epoch, 1); err != nil {
		t.Fatal(err)
	}

	_, err = ls["team-a"].InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "b-orders"})
	wantDeniedQuietly(t, "team-a registers team-b's name", err)
	wantDeniedQuietly(t, "team-a appends with team-b's id", appendAs("team-a", b.ProducerId, b.Epoch, 2))
	_, err = ls["team-a"].AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{
		{Slices: orders}, {Slices: orders, ProducerId: b.ProducerId, ProducerEpoch: b.Epoch, Sequence: 2}}})
	wantDeniedQuietly(t, "team-a's batch with team-b's id", err)
	wantDeniedQuietly(t, "team-a appends with a legacy id of team-b's names", appendAs("team-a", "b-legacy", 0, 1))
	// A grant without names may use every name no grant binds: not b-*.
	_, err = ls["team-c"].InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "b-orders"})
	wantDeniedQuietly(t, "team-c (no names) registers a name bound to team-b", err)

	// Team B was neither fenced nor moved: its next sequence is 2.
	if err := appendAs("team-b", b.ProducerId, b.Epoch, 2); err != nil {
		t.Fatalf("team-b after team-a's attempts: %v", err)
	}
	// Each team uses its own names; team-c the names nobody binds.
	a, err := ls["team-a"].InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "a-orders"})
	if err != nil {
		t.Fatal(err)
	}
	if err := appendAs("team-a", a.ProducerId, a.Epoch, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ls["team-c"].InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "c-orders"}); err != nil {
		t.Fatalf("team-c, an unbound name: %v", err)
	}
}
