package fetcher

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The logplayer_fetcher_… series a scrape shows (names, help strings,
// labels) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.reconnects.WithLabelValues("main")
	m.belowRetention.WithLabelValues("recovery")
	testmetric.Golden(t, reg, "testdata/metrics.txt")
	if _, err := newMetrics(reg); err == nil {
		t.Fatal("a second fetcher on the same registry: no error")
	}
	if _, err := newMetrics(nil); err != nil {
		t.Fatalf("no registry: %v", err)
	}
}
