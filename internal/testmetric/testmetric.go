// Package testmetric reads one metric out of a Prometheus registry for a
// test's assertion, the one way every package's tests do it:
//
//	testmetric.Value(t, reg, "target_refusals_total", map[string]string{"reason": "stale_epoch"})
//
// Goroutines: none.
package testmetric

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

var rewrite = flag.Bool("testmetric.rewrite", false, "rewrite the expected expositions that testmetric.Golden compares")

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

// Golden compares what a scrape of g shows (the Prometheus text format:
// every family's HELP and TYPE, every series with its labels, buckets and
// values) with the file path. Regenerate with `go test ./pkg -run Test…
// -testmetric.rewrite` and review the diff: a changed line is a changed
// metric name, help string, label or bucket that dashboards see.
func Golden(t testing.TB, g prometheus.Gatherer, path string) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&got, mf); err != nil {
			t.Fatal(err)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("scrape differs from %s (rewrite with -testmetric.rewrite and review the diff):\n got:\n%s\nwant:\n%s", path, got.Bytes(), want)
	}
}

// Constructor checks a package's metrics constructor: build registers its
// collectors on a new registry (and may create the vectors' children the
// scrape should show), the scrape is the one in file (Golden), and a
// second build on the same registry fails: two nodes or targets of one
// name on a registry are an error for the caller, not a panic.
func Constructor(t testing.TB, file string, build func(prometheus.Registerer) error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := build(reg); err != nil {
		t.Fatal(err)
	}
	Golden(t, reg, file)
	if err := build(reg); err == nil {
		t.Fatal("the same collectors registered twice on one registry: no error")
	}
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
