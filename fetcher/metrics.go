package fetcher

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/metric"
)

type metrics struct {
	reconnects     *prometheus.CounterVec
	belowRetention *prometheus.CounterVec
	mainNext       prometheus.Gauge
	stalls         prometheus.Counter
}

// newMetrics builds the fetcher's metrics and registers them on reg (nil:
// kept but not exported).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.With(reg, nil)
	m := &metrics{
		reconnects:     f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_fetcher_reconnects_total", Help: "LogStore Read streams reopened after a failure, by stream kind (main, recovery)."}, []string{"stream"}),
		belowRetention: f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_fetcher_below_retention_total", Help: "Read streams refused because the LogStore no longer holds the wanted LSN, by stream kind."}, []string{"stream"}),
		mainNext:       f.NewGauge(prometheus.GaugeOpts{Name: "logplayer_fetcher_main_next_lsn", Help: "The next LSN the main stream will hand to the dispatcher."}),
		stalls:         f.NewCounter(prometheus.CounterOpts{Name: "logplayer_fetcher_main_stalls_total", Help: "Main streams abandoned because they were silent while another LogStore node was ahead."}),
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
