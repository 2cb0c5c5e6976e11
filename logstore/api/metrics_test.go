package api

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The edge's logstore_… series a scrape shows (names, help strings,
// labels, buckets) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	m.appendDuration.WithLabelValues("OK")
	testmetric.Golden(t, reg, "testdata/metrics.txt")
	if _, err := NewMetrics(reg, "n1"); err == nil {
		t.Fatal("a second edge n1 on the same registry: no error")
	}
}
