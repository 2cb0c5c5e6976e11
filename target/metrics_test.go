package target

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The target_… series a scrape shows (names, help strings, labels,
// buckets) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, "t1")
	if err != nil {
		t.Fatal(err)
	}
	m.refusals.WithLabelValues("stale_epoch")
	testmetric.Golden(t, reg, "testdata/metrics.txt")
	if _, err := newMetrics(reg, "t1"); err == nil {
		t.Fatal("a second target t1 on the same registry: no error")
	}
}
