package logstore

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The node's logstore_… series a scrape shows (names, help strings,
// labels, buckets) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	testmetric.Constructor(t, "testdata/metrics.txt", func(reg prometheus.Registerer) error {
		_, err := newMetrics(reg, "n1")
		return err
	})
}
