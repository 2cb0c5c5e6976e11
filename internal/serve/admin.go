package serve

import (
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
