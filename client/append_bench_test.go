package client

import (
	"context"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// instantStore answers every Append at once with the same response.
type instantStore struct {
	logstorepb.UnimplementedLogStoreServer
}

func (instantStore) Append(context.Context, *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	return &logstorepb.AppendResponse{Lsn: 1}, nil
}

// BenchmarkAppendClientOverhead is one Append at a time (bench store's
// serial path, 1 client) against a server that answers at once, over
// loopback TCP: path=grpc is the bare generated stub on a connection,
// path=client is Client.Append (retry loop, deadlines, node pick, the
// connection's batcher) on its own connection to the same server. The
// difference is the client library's own cost per call; the caller's
// context has a deadline, as bench store's does (logstore/bench/bench.go).
// cpu-ns/op is the process's CPU time (client and server) per call, which
// a loaded machine disturbs less than the wall time.
func BenchmarkAppendClientOverhead(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	logstorepb.RegisterLogStoreServer(gs, instantStore{})
	go gs.Serve(lis)
	defer gs.Stop()
	addr := lis.Addr().String()
	req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "bench-0",
		Messages: []*logstorepb.Message{{Value: make([]byte, 512)}}}}}

	b.Run("path=grpc", func(b *testing.B) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		ls := logstorepb.NewLogStoreClient(cc)
		appendLoop(b, func(ctx context.Context) error {
			_, err := ls.Append(ctx, req)
			return err
		})
	})
	b.Run("path=client", func(b *testing.B) {
		cl, err := New(Config{Addrs: []string{addr}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		appendLoop(b, func(ctx context.Context) error {
			_, err := cl.Append(ctx, req)
			return err
		})
	})
}

// appendLoop runs call back to back, each call with a 30 s deadline,
// and reports allocations and CPU time per call.
func appendLoop(b *testing.B, call func(ctx context.Context) error) {
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := call(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}

// reportCPU starts counting the process's CPU time; the function it
// returns reports it per op as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
