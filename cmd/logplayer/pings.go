package main

import (
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/logplayer"
)

// allowPlayerPings lets a gRPC server accept the LogPlayer's keepalive pings
// (gRPC's default policy answers pings more frequent than 5 minutes with
// GOAWAY too_many_pings). Every server a LogPlayer connects to uses it: the
// targets and the LogStore nodes.
func allowPlayerPings() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive)
}

// targetServerOptions are a target role's server options after
// target.ServerOptions (serve.ListenTarget adds those): the LogPlayer's
// pings, then opts, its security (internal/cli/tlsflags.go:TLSServerFlags.Setup).
func targetServerOptions(opts []grpc.ServerOption) []grpc.ServerOption {
	return append([]grpc.ServerOption{allowPlayerPings()}, opts...)
}
