// Package metric builds a package's Prometheus collectors with
// prometheus/client_golang's promauto, one declaration each, while the
// package's constructor still returns a registration error (a second node
// or target of the same name on one registry) instead of the panic that
// promauto.With(reg) gives:
//
//	f := metric.With(reg, prometheus.Labels{"node": node})
//	m := &metrics{headLSN: f.NewGauge(prometheus.GaugeOpts{Name: "logstore_head_lsn", Help: "…"})}
//	if err := f.Err(); err != nil { … }
//
// Goroutines: none.
package metric

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Factory is a promauto.Factory (NewCounter, NewGaugeVec, NewHistogram, …
// taking the prometheus Opts as they are) whose registrations end in Err.
type Factory struct {
	promauto.Factory
	r *registerer
}

// With returns a Factory that registers every collector it builds on reg,
// with labels added to each of its series (nil: none), as ConstLabels in
// every Opts would. A nil reg builds the collectors and registers nothing.
func With(reg prometheus.Registerer, labels prometheus.Labels) Factory {
	if reg == nil {
		return Factory{Factory: promauto.With(nil), r: &registerer{}}
	}
	if len(labels) > 0 {
		reg = prometheus.WrapRegistererWith(labels, reg)
	}
	r := &registerer{reg: reg}
	return Factory{Factory: promauto.With(r), r: r}
}

// Register registers c (a hand-written Collector) like the collectors the
// Factory builds.
func (f Factory) Register(c prometheus.Collector) { f.r.MustRegister(c) }

// Err is the first registration that failed, or nil. The collectors
// built after it were not registered.
func (f Factory) Err() error { return f.r.err }

// registerer is the prometheus.Registerer promauto registers on: its
// MustRegister keeps the first error rather than panicking.
type registerer struct {
	reg prometheus.Registerer // nil: register nothing
	err error
}

func (r *registerer) Register(c prometheus.Collector) error {
	r.MustRegister(c)
	return r.err
}

func (r *registerer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if r.reg != nil && r.err == nil {
			r.err = r.reg.Register(c)
		}
	}
}

func (r *registerer) Unregister(c prometheus.Collector) bool {
	return r.reg != nil && r.reg.Unregister(c)
}
