package metric

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The Factory adds its labels to every series, registers what it builds,
// and turns a failed registration into Err (promauto.With panics): the
// collectors after the failure stay unregistered.
func TestWithLabelsAndErr(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := With(reg, prometheus.Labels{"node": "n1"})
	f.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "A."}).Add(2)
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}
	if v := testmetric.Value(t, reg, "a_total", map[string]string{"node": "n1"}); v != 2 {
		t.Fatalf("a_total{node=n1} = %v, want 2", v)
	}

	g := With(reg, prometheus.Labels{"node": "n1"})
	g.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "A."})
	g.NewGauge(prometheus.GaugeOpts{Name: "b", Help: "B."}).Set(1)
	if g.Err() == nil {
		t.Fatal("a_total{node=n1} registered twice: no error")
	}
	if v := testmetric.Value(t, reg, "b", nil); v != 0 {
		t.Fatalf("b registered after the failure: %v", v)
	}
}

// A nil registerer builds working collectors and registers nothing.
func TestWithNil(t *testing.T) {
	f := With(nil, prometheus.Labels{"node": "n1"})
	c := f.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "A."})
	c.Inc()
	f.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "b", Help: "B."}))
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}
}
