package main

import (
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/target"
)

// serveTarget registers the target's services and serves them on lis in a
// goroutine until Stop, allowing the LogPlayer's keepalive pings; opts are
// its security (tlsServerFlags.serverOptions).
func serveTarget(id string, lis net.Listener, register func(grpc.ServiceRegistrar), closeFn func() error, log *slog.Logger, opts ...grpc.ServerOption) *serve.Target {
	return serve.StartTarget(id, lis, register, closeFn, log, append(append(target.ServerOptions(), allowPlayerPings()), opts...)...)
}

// allowPlayerPings lets a gRPC server accept the LogPlayer's keepalive pings
// (gRPC's default policy answers pings more frequent than 5 minutes with
// GOAWAY too_many_pings). Every server a LogPlayer connects to uses it: the
// targets and the LogStore nodes.
func allowPlayerPings() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive)
}

// startTargetServer listens on addr and serves the target there
// (serveTarget), and its /metrics (reg) on metricsAddr ("": none, ms nil;
// Stop of a nil *serve.Metrics does nothing). On an error it closes what
// it opened and calls closeFn: the target is closed, not served.
func startTargetServer(id, addr, metricsAddr string, reg prometheus.Gatherer, metricsTLS *tls.Config, register func(grpc.ServiceRegistrar), closeFn func() error, log *slog.Logger, opts ...grpc.ServerOption) (ts *serve.Target, ms *serve.Metrics, err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		_ = closeFn()
		return nil, nil, err
	}
	ms, err = serve.StartMetricsTLS(metricsAddr, reg, log, metricsTLS)
	if err != nil {
		_ = lis.Close()
		_ = closeFn()
		return nil, nil, err
	}
	return serveTarget(id, lis, register, closeFn, log, opts...), ms, nil
}
