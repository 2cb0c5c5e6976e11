package testmetric

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValueAndSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"reason", "target"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds"})
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "s_seconds"})
	reg.MustRegister(c, g, h, s)
	c.WithLabelValues("a", "x").Add(2)
	c.WithLabelValues("a", "y").Add(3)
	c.WithLabelValues("b", "x").Add(5)
	g.Set(-1.5)
	h.Observe(0.25)
	h.Observe(0.5)
	s.Observe(2)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", map[string]string{"reason": "a"}, 5},
		{"c_total", map[string]string{"reason": "a", "target": "y"}, 3},
		{"c_total", map[string]string{"reason": "z"}, 0},
		{"g", nil, -1.5},
		{"h_seconds", nil, 2},
		{"s_seconds", nil, 1},
		{"missing", nil, 0},
	} {
		if got := Value(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Value(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if got := Sum(t, reg, "h_seconds", nil); got != 0.75 {
		t.Errorf("Sum(h) = %v", got)
	}
	if got := Sum(t, reg, "s_seconds", nil); got != 2 {
		t.Errorf("Sum(s) = %v", got)
	}
}
