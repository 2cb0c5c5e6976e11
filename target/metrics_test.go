package target

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The target_… series a scrape shows (names, help strings, labels,
// buckets) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	testmetric.Constructor(t, "testdata/metrics.txt", func(reg prometheus.Registerer) error {
		m, err := newMetrics(reg, "t1")
		if err == nil {
			m.refusals.WithLabelValues("stale_epoch")
		}
		return err
	})
}
