package fetcher

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	reconnects     *prometheus.CounterVec
	belowRetention *prometheus.CounterVec
	mainNext       prometheus.Gauge
	stalls         prometheus.Counter
}

// newMetrics builds the fetcher's metrics and registers them on reg (nil:
// kept but not exported).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logplayer_fetcher_reconnects_total",
			Help: "LogStore Read streams reopened after a failure, by stream kind (main, recovery).",
		}, []string{"stream"}),
		belowRetention: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "logplayer_fetcher_below_retention_total",
			Help: "Read streams refused because the LogStore no longer holds the wanted LSN, by stream kind.",
		}, []string{"stream"}),
		mainNext: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "logplayer_fetcher_main_next_lsn",
			Help: "The next LSN the main stream will hand to the dispatcher.",
		}),
		stalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "logplayer_fetcher_main_stalls_total",
			Help: "Main streams abandoned because they were silent while another LogStore node was ahead.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.reconnects, m.belowRetention, m.mainNext, m.stalls} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
