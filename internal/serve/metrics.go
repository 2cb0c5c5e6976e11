package serve

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

const (
	// metricsShutdownMax bounds the graceful stop of a metrics endpoint.
	metricsShutdownMax = 2 * time.Second
	// metricsReadHeaderMax bounds a scrape's request headers.
	metricsReadHeaderMax = 5 * time.Second
)

// ProcessRegistry returns a registry with the Go runtime and process
// collectors, for a role's own metrics.
func ProcessRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves g in the Prometheus text format, logging gather
// errors to log (nil: not logged).
func MetricsHandler(g prometheus.Gatherer, log *slog.Logger) http.Handler {
	opts := promhttp.HandlerOpts{}
	if log != nil {
		opts.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return promhttp.HandlerFor(g, opts)
}

// Metrics serves /metrics for a gatherer on one address.
type Metrics struct {
	srv  *http.Server
	lis  net.Listener
	done chan struct{} // closed when Serve returned
}

// StartMetrics listens on addr (nothing, and nil, when addr is empty) and
// serves g on /metrics until Stop.
func StartMetrics(addr string, g prometheus.Gatherer, log *slog.Logger) (*Metrics, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	return ServeMetricsOn(lis, g, log), nil
}

// ServeMetricsOn serves g on /metrics on lis until Stop.
func ServeMetricsOn(lis net.Listener, g prometheus.Gatherer, log *slog.Logger) *Metrics {
	mux := http.NewServeMux()
	mux.Handle("/metrics", MetricsHandler(g, log))
	m := &Metrics{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: metricsReadHeaderMax},
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
	return m
}

// Addr is the endpoint's bound address.
func (m *Metrics) Addr() string { return m.lis.Addr().String() }

// Stop shuts the endpoint down (bounded by metricsShutdownMax); nil-safe.
func (m *Metrics) Stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownMax)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}
