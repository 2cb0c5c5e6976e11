package serve_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/security"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
)

// TestRunTargetServesUntilDone: RunTarget opens the target with a registry,
// serves it (a Hello is answered), logs its serving line with the
// target's attributes, and at the end of ctx closes the store and returns.
func TestRunTargetServesUntilDone(t *testing.T) {
	var logs bytes.Buffer // read once RunTarget returned: its servers have stopped
	log := slog.New(slog.NewTextHandler(&logs, nil))
	addr := logstoretest.FreeAddr(t)
	closed := false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- serve.RunTarget(ctx, serve.TargetRole{ID: "t1", Addr: addr, Log: log}, func(reg prometheus.Registerer) (*serve.OpenTarget, error) {
			return serve.StoreTarget(target.Config{TargetID: "t1", Store: &targettest.MemStore{}, Topics: []string{"a"}, Logger: logstoretest.QuietLogger(), Registerer: reg},
				func() error { closed = true; return nil }, "test target serving", "dir", "d1")
		})
	}()
	cc := targettest.Dial(t, addr)
	testwait.ForErr(t, testwait.Max, "the target to answer a Hello", func() error {
		s, _, err := targettest.Open(targettest.Context(t), cc, targettest.Hello("t1", 1, 1))
		if err == nil {
			s.Close()
		}
		return err
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunTarget: %v", err)
	}
	if !closed {
		t.Error("the store was not closed")
	}
	out := logs.String()
	for _, want := range []string{`msg="test target serving" target=t1 addr=` + addr + " dir=d1", `msg="shutting down" target=t1`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestRunTargetOpenErrors: an error of open is RunTarget's, and
// StoreTarget closes the store of an invalid config.
func TestRunTargetOpenErrors(t *testing.T) {
	role := serve.TargetRole{ID: "t1", Addr: logstoretest.FreeAddr(t), Log: logstoretest.QuietLogger()}
	errOpen := errors.New("no store")
	err := serve.RunTarget(context.Background(), role, func(prometheus.Registerer) (*serve.OpenTarget, error) { return nil, errOpen })
	if err != errOpen {
		t.Fatalf("RunTarget: %v, want the open error", err)
	}
	closed := false
	err = serve.RunTarget(context.Background(), role, func(reg prometheus.Registerer) (*serve.OpenTarget, error) {
		return serve.StoreTarget(target.Config{TargetID: "t1", Store: &targettest.MemStore{}, Topics: []string{"a", "a"}, Registerer: reg},
			func() error { closed = true; return nil }, "serving")
	})
	if !errors.Is(err, target.ErrInvalidConfig) || !closed {
		t.Fatalf("RunTarget of a target with a topic twice: %v (store closed: %v), want target.ErrInvalidConfig and closed", err, closed)
	}
}

// TestRunStoreServesUntilDone: the store role serves the node's API
// (health SERVING) until ctx ends, then logs and closes it.
func TestRunStoreServesUntilDone(t *testing.T) {
	var logs bytes.Buffer // read once RunStore returned: its servers have stopped
	cfg := logstoretest.Config("n0", t.TempDir())
	cfg.RaftAddr, cfg.APIAddr = logstoretest.FreeAddr(t), logstoretest.FreeAddr(t)
	cfg.Bootstrap = []logstore.Peer{{ID: "n0", RaftAddr: cfg.RaftAddr, APIAddr: cfg.APIAddr}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- serve.RunStore(ctx, serve.StoreRoleConfig{Node: cfg, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	cc, err := grpc.NewClient(cfg.APIAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	testwait.ForErr(t, 30*time.Second, "health SERVING", func() error {
		h, err := healthpb.NewHealthClient(cc).Check(targettest.Context(t), &healthpb.HealthCheckRequest{})
		if err == nil && h.Status != healthpb.HealthCheckResponse_SERVING {
			err = errors.New(h.Status.String())
		}
		return err
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunStore: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, `msg="shutting down" node=n0`) {
		t.Errorf("log lacks the shutdown line:\n%s", out)
	}
}

// TestRunStoreConfigErrors: an invalid node and security files that do
// not load are ErrConfig, with the cause's message.
func TestRunStoreConfigErrors(t *testing.T) {
	missing := security.Files{CAFile: "/nonexistent/ca.crt", CertFile: "/nonexistent/n0.crt", KeyFile: "/nonexistent/n0.key"}
	node := func() logstore.Config {
		cfg := logstoretest.Config("n0", t.TempDir())
		cfg.RaftAddr, cfg.APIAddr = logstoretest.FreeAddr(t), logstoretest.FreeAddr(t)
		return cfg
	}
	noID := node()
	noID.ID = ""
	for name, rc := range map[string]serve.StoreRoleConfig{
		"invalid node": {Node: noID},
		"raft tls":     {Node: node(), RaftTLS: missing, RaftPeers: []string{"n*"}},
		"peer tls":     {Node: node(), PeerTLS: missing},
	} {
		t.Run(name, func(t *testing.T) {
			rc.Log = logstoretest.QuietLogger()
			err := serve.RunStore(context.Background(), rc)
			if !errors.Is(err, serve.ErrConfig) || strings.Contains(err.Error(), serve.ErrConfig.Error()) {
				t.Fatalf("RunStore: %v, want ErrConfig with the cause's message only", err)
			}
			if name == "invalid node" && !errors.Is(err, logstore.ErrConfig) {
				t.Fatalf("RunStore: %v, want logstore.ErrConfig", err)
			}
		})
	}
}
