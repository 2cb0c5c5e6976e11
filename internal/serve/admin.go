package serve

import (
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/grpcedge"
)

// StartAdmin serves a LogPlayer's admin API (register, e.g.
// logplayer.NewAdminServer(p).Register) on lis with the edge's options
// (malformed requests answer INVALID_ARGUMENT) followed by opts.
func StartAdmin(lis net.Listener, register func(grpc.ServiceRegistrar), log *slog.Logger, opts ...grpc.ServerOption) *GRPC {
	return StartGRPC("admin", lis, register, log, append(grpcedge.ServerOptions(), opts...)...)
}

// ListenAdmin listens on addr and serves a LogPlayer's admin API there
// (StartAdmin) until Stop; what `logplayer player --admin-addr` runs.
func ListenAdmin(addr string, register func(grpc.ServiceRegistrar), log *slog.Logger, opts ...grpc.ServerOption) (*GRPC, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin endpoint: %w", err)
	}
	a := StartAdmin(lis, register, log, opts...)
	log.Info("admin endpoint", "addr", a.Addr())
	return a, nil
}
