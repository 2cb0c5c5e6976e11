package main

import (
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/target"
)

// serveTarget registers the target's services and serves them on lis in a
// goroutine until Stop, allowing the LogPlayer's keepalive pings.
func serveTarget(id string, lis net.Listener, register func(grpc.ServiceRegistrar), closeFn func() error, log *slog.Logger) *serve.Target {
	return serve.StartTarget(id, lis, register, closeFn, log, append(target.ServerOptions(), allowPlayerPings())...)
}

// allowPlayerPings lets a gRPC server accept the LogPlayer's keepalive pings
// (gRPC's default policy answers pings more frequent than 5 minutes with
// GOAWAY too_many_pings). Every server a LogPlayer connects to uses it: the
// targets and the LogStore nodes.
func allowPlayerPings() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive)
}
