package api

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The edge's logstore_… series a scrape shows (names, help strings,
// labels, buckets) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	testmetric.Constructor(t, "testdata/metrics.txt", func(reg prometheus.Registerer) error {
		m, err := NewMetrics(reg, "n1")
		if err == nil {
			m.appendDuration.WithLabelValues("OK")
		}
		return err
	})
}
