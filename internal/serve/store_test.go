package serve_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// startStore serves a single-voter node with /metrics on a free port and
// waits until it leads.
func startStore(t *testing.T) (*serve.Store, *grpc.ClientConn) {
	t.Helper()
	cfg := logstoretest.Config("n0", t.TempDir())
	cfg.RaftListener = logstoretest.Listen(t)
	api := logstoretest.Listen(t)
	cfg.APIAddr = api.Addr().String()
	cfg.Bootstrap = []logstore.Peer{{ID: "n0", RaftAddr: cfg.RaftListener.Addr().String(), APIAddr: cfg.APIAddr}}
	st, err := serve.StartStore(cfg, api, logstoretest.FreeAddr(t), logstoretest.QuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	testwait.For(t, 30*time.Second, "a leader", st.Node.IsLeader)
	cc, err := grpc.NewClient(st.Node.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return st, cc
}

// TestStoreServesAPIHealthReflectionAndMetrics: what `logplayer store`
// serves: the LogStore API, health SERVING, reflection naming the
// services, and the node's metrics on /metrics.
func TestStoreServesAPIHealthReflectionAndMetrics(t *testing.T) {
	st, cc := startStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := logstorepb.NewLogStoreClient(cc).Append(ctx, &logstorepb.AppendRequest{
		Slices: []*logstorepb.Slice{{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("x")}}}},
	}); err != nil {
		t.Fatalf("append: %v", err)
	}
	h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", h, err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	for _, want := range []string{"logplayer.logstore.v1.LogStore", "logplayer.logstore.v1.Cluster", "grpc.health.v1.Health"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("reflection lists %v, want %s", names, want)
		}
	}
	mr, err := http.Get("http://" + st.Metrics.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Body.Close()
	body, _ := io.ReadAll(mr.Body)
	if !strings.Contains(string(body), `logstore_head_lsn{node="n0"} 1`) {
		t.Fatalf("metrics lack the node's head LSN:\n%.2000s", body)
	}
}

// TestStoreAPIStopEndsReadStreams: stopping the API ends a waiting Read
// stream with SHUTTING_DOWN at once (not after StoreAPIStopMax), and
// health reports NOT_SERVING while it stops.
func TestStoreAPIStopEndsReadStreams(t *testing.T) {
	st, cc := startStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := logstorepb.NewLogStoreClient(cc).Read(ctx, &logstorepb.ReadRequest{FromLsn: 1})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	start := time.Now()
	st.API.Stop()
	select {
	case err := <-ended:
		if apierr.CodeOf(err) != logstorepb.ErrorCode_SHUTTING_DOWN {
			t.Fatalf("read stream ended with %v, want SHUTTING_DOWN", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("read stream still open after Stop")
	}
	if took := time.Since(start); took >= serve.StoreAPIStopMax {
		t.Fatalf("Stop took %v: the read stream held the graceful stop to its cap", took)
	}
}
