package serve

import (
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/target"
)

// ListenTarget listens on addr and serves the target there (StartTarget
// with target.ServerOptions and then opts: the LogPlayer's keepalive
// policy, logplayer.ServerKeepalive, and the target's security), and its
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
	return StartTarget(id, lis, register, closeFn, log, append(target.ServerOptions(), opts...)...), ms, nil
}
