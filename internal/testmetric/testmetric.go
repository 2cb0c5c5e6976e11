// Package testmetric reads one metric out of a Prometheus registry for a
// test's assertion, the one way every package's tests do it:
//
//	testmetric.Value(t, reg, "target_refusals_total", map[string]string{"reason": "stale_epoch"})
//
// Goroutines: none.
package testmetric

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value sums, over the series of the family name in g whose labels include
// labels (nil: every series), counter and gauge values and histogram and
// summary sample counts. It is 0 when no series matches.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	var v float64
	for _, m := range series(t, g, name, labels) {
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Untyped != nil:
			v += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil:
			v += float64(m.GetSummary().GetSampleCount())
		}
	}
	return v
}

// Sum is Value for the sample sums of histograms and summaries.
func Sum(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	var v float64
	for _, m := range series(t, g, name, labels) {
		v += m.GetHistogram().GetSampleSum() + m.GetSummary().GetSampleSum()
	}
	return v
}

// series gathers g and returns the matching series of name.
func series(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				out = append(out, m)
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
