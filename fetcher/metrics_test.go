package fetcher

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The logplayer_fetcher_… series a scrape shows (names, help strings,
// labels) are the ones in testdata/metrics.txt; without a registry the
// metrics are kept but not exported.
func TestMetricsExposition(t *testing.T) {
	testmetric.Constructor(t, "testdata/metrics.txt", func(reg prometheus.Registerer) error {
		m, err := newMetrics(reg)
		if err == nil {
			m.reconnects.WithLabelValues("main")
			m.belowRetention.WithLabelValues("recovery")
		}
		return err
	})
	if _, err := newMetrics(nil); err != nil {
		t.Fatalf("no registry: %v", err)
	}
}
