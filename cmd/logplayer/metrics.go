package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsShutdownMax bounds the graceful stop of the metrics endpoint.
const metricsShutdownMax = 2 * time.Second

// processRegistry returns a registry with the Go runtime and process
// collectors, for a role's own metrics.
func processRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metricsServer serves /metrics for g on one address.
type metricsServer struct {
	srv  *http.Server
	lis  net.Listener
	done chan struct{} // closed when Serve returned
}

// startMetrics listens on addr (nothing when addr is empty) and serves g on
// /metrics until stop.
func startMetrics(addr string, g prometheus.Gatherer, log *slog.Logger) (*metricsServer, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	return serveMetricsOn(lis, g, log)
}

// serveMetricsOn serves g on /metrics on lis until stop.
func serveMetricsOn(lis net.Listener, g prometheus.Gatherer, log *slog.Logger) (*metricsServer, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	m := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		lis:  lis,
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	log.Info("metrics endpoint", "addr", "http://"+lis.Addr().String()+"/metrics")
	return m, nil
}

// Addr is the endpoint's bound address.
func (m *metricsServer) Addr() string { return m.lis.Addr().String() }

// stop shuts the endpoint down; nil-safe.
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownMax)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}
