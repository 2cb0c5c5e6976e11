package targettest

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/target"
)

// Serve starts a target.Server for cfg on 127.0.0.1:0 and returns it with
// its address. The test's cleanup closes it.
func Serve(t testing.TB, cfg target.Config) (*target.Server, string) {
	t.Helper()
	srv, err := target.NewServer(cfg)
	if err != nil {
		t.Fatalf("targettest: NewServer: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatalf("targettest: listen: %v", err)
	}
	gs := grpc.NewServer(target.ServerOptions()...)
	srv.Register(gs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // written once by the serving goroutine
	go func() { done <- target.Serve(ctx, gs, lis, srv) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("targettest: serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

// Dial returns a client connection to addr closed by the test's cleanup.
func Dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("targettest: dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
