package serve

import (
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/target"
)

// PlayerPings lets a gRPC server accept the LogPlayer's keepalive pings
// (gRPC's default policy answers pings more frequent than 5 minutes with
// GOAWAY too_many_pings). Every server a LogPlayer connects to uses it: the
// targets and the LogStore nodes.
func PlayerPings() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive)
}

// ListenTarget listens on addr and serves the target there (StartTarget
// with target.ServerOptions, PlayerPings and opts, its security), and its
// /metrics (reg) on metricsAddr ("": none, ms nil; Stop of a nil *Metrics
// does nothing). On an error it closes what it opened and calls closeFn:
// the target is closed, not served. What `logplayer shard`, `sink` and
// `events` run.
func ListenTarget(id, addr, metricsAddr string, reg prometheus.Gatherer, metricsTLS *tls.Config, register func(grpc.ServiceRegistrar), closeFn func() error, log *slog.Logger, opts ...grpc.ServerOption) (ts *Target, ms *Metrics, err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		_ = closeFn()
		return nil, nil, err
	}
	ms, err = StartMetricsTLS(metricsAddr, reg, log, metricsTLS)
	if err != nil {
		_ = lis.Close()
		_ = closeFn()
		return nil, nil, err
	}
	return StartTarget(id, lis, register, closeFn, log, append(append(target.ServerOptions(), PlayerPings()), opts...)...), ms, nil
}
