package logstore

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The node's logstore_… series a scrape shows (names, help strings,
// labels, buckets) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, "n1"); err != nil {
		t.Fatal(err)
	}
	testmetric.Golden(t, reg, "testdata/metrics.txt")
	if _, err := newMetrics(reg, "n1"); err == nil {
		t.Fatal("a second node n1 on the same registry: no error")
	}
}
