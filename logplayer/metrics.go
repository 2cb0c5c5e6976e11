package logplayer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/metric"
	"github.com/logplayer/logplayer/targetqueue"
)

// deliveryBuckets: 25µs to ~1.6s, doubling: a healthy delivery is well
// under a millisecond (the paper's goal), a recovering one seconds.
var deliveryBuckets = prometheus.ExponentialBuckets(25e-6, 2, 17)

// metrics are the logplayer_… series. Counters and histograms that the
// Player updates as things happen are vectors labelled by target; the
// per-target state (queue depths, term, lag, …) is read from the
// dispatcher at scrape time by a collector, so it can never go stale.
type metrics struct {
	epoch          prometheus.Gauge
	saturation     prometheus.Gauge
	delivery       *prometheus.HistogramVec
	refusals       *prometheus.CounterVec
	recoveries     *prometheus.CounterVec
	recoveryStarts *prometheus.CounterVec
	recoveryErrors *prometheus.CounterVec
	bogusAcks      *prometheus.CounterVec
}

// targetMetrics are one target's children of the vectors.
type targetMetrics struct {
	delivery       prometheus.Observer
	refusals       *prometheus.CounterVec // by code
	recoveries     prometheus.Counter
	recoveryStarts prometheus.Counter
	recoveryErrors *prometheus.CounterVec // by reason
	bogusAcks      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, p *Player) (*metrics, error) {
	f := metric.With(reg, nil)
	target := []string{"target"}
	m := &metrics{
		epoch:          f.NewGauge(prometheus.GaugeOpts{Name: "logplayer_epoch", Help: "This LogPlayer instance's epoch (from the LogStore)."}),
		saturation:     f.NewGauge(prometheus.GaugeOpts{Name: "logplayer_dispatch_saturation", Help: "Fraction of the last second the dispatch loop spent dispatching (1: the main stream is the bottleneck)."}),
		delivery:       f.NewHistogramVec(prometheus.HistogramOpts{Name: "logplayer_delivery_duration_seconds", Help: "From dispatch (push into the target queue) to the target's durable ack, per delivery.", Buckets: deliveryBuckets}, target),
		refusals:       f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_target_refusals_total", Help: "Streams a target ended with a refusal, by ErrorCode (package target documents them)."}, []string{"target", "code"}),
		recoveries:     f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_target_recoveries_total", Help: "Recovery streams that fetched a returning target's whole missed range."}, target),
		recoveryStarts: f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_target_recovery_starts_total", Help: "Recovery streams started (a target returned behind the main stream)."}, target),
		recoveryErrors: f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_target_recovery_errors_total", Help: "Recovery streams that failed, by reason (below_retention: the LogStore no longer holds what the target needs)."}, []string{"target", "reason"}),
		bogusAcks:      f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_target_bogus_acks_total", Help: "Acks above everything sent to the target (the stream is then resynced)."}, target),
	}
	f.Register(&stateCollector{p: p})
	if err := f.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) forTarget(id string) *targetMetrics {
	l := prometheus.Labels{"target": id}
	return &targetMetrics{
		delivery:       m.delivery.With(l),
		refusals:       m.refusals.MustCurryWith(l),
		recoveries:     m.recoveries.With(l),
		recoveryStarts: m.recoveryStarts.With(l),
		recoveryErrors: m.recoveryErrors.MustCurryWith(l),
		bogusAcks:      m.bogusAcks.With(l),
	}
}

func (m *metrics) removeTarget(id string) {
	l := prometheus.Labels{"target": id}
	m.delivery.DeletePartialMatch(l)
	m.refusals.DeletePartialMatch(l)
	m.recoveries.DeletePartialMatch(l)
	m.recoveryStarts.DeletePartialMatch(l)
	m.recoveryErrors.DeletePartialMatch(l)
	m.bogusAcks.DeletePartialMatch(l)
}

// stateCollector reports every target's state at scrape time.
type stateCollector struct{ p *Player }

var (
	descState = prometheus.NewDesc("logplayer_target_state",
		"Target queue state: 0 N (normal), 1 RF (recovery fetching), 2 FC (fetching completed), 3 S (suspended).",
		[]string{"target"}, nil)
	descTerm      = prometheus.NewDesc("logplayer_target_term", "Target term: the dispatcher's per-target generation, bumped at each return.", []string{"target"}, nil)
	descConnected = prometheus.NewDesc("logplayer_target_connected", "1 when a Deliver stream to the target is up.", []string{"target"}, nil)
	descBlocked   = prometheus.NewDesc("logplayer_target_blocked",
		"1 when the target refused permanently or needs data below retention: an operator must act.", []string{"target"}, nil)
	descDepth = prometheus.NewDesc("logplayer_target_queue_messages", "Messages in the target's queue.",
		[]string{"target", "queue"}, nil)
	descDepthBytes = prometheus.NewDesc("logplayer_target_queue_bytes", "Payload bytes in the target's queue.",
		[]string{"target", "queue"}, nil)
	descInflight      = prometheus.NewDesc("logplayer_target_inflight_batches", "Batches sent and not yet acked.", []string{"target"}, nil)
	descInflightBytes = prometheus.NewDesc("logplayer_target_inflight_bytes", "Payload bytes sent and not yet acked.", []string{"target"}, nil)
	descLastAck       = prometheus.NewDesc("logplayer_target_last_ack_lsn", "The target's last acked (durably applied) LSN.", []string{"target"}, nil)
	descLagEntries    = prometheus.NewDesc("logplayer_target_lag_entries", "LSNs dispatched and not yet acked by the target.", []string{"target"}, nil)
	descLagSeconds    = prometheus.NewDesc("logplayer_target_lag_seconds",
		"Log time between the newest dispatched transaction and the newest the target acked.", []string{"target"}, nil)
	descReturns      = prometheus.NewDesc("logplayer_target_returns_total", "Handshakes that (re)started delivery (term bumps).", []string{"target"}, nil)
	descSuspends     = prometheus.NewDesc("logplayer_target_suspends_total", "Times the target was suspended (stream lost or too slow).", []string{"target"}, nil)
	descSlowSuspends = prometheus.NewDesc("logplayer_target_slow_suspends_total",
		"Slow suspensions: the target's normal queue was full, so it was suspended to recover from the LogStore.", []string{"target"}, nil)
	descStaleDrops = prometheus.NewDesc("logplayer_target_stale_term_drops_total",
		"Pushes and completions refused because their term was stale.", []string{"target"}, nil)
	descProgress = prometheus.NewDesc("logplayer_target_progress_entries_total", "Progress markers sent to the idle target.", []string{"target"}, nil)
	descCurrent  = prometheus.NewDesc("logplayer_current_lsn", "LSN of the last transaction the main stream dispatched.", nil, nil)
)

var stateDescs = []*prometheus.Desc{descState, descTerm, descConnected, descBlocked, descDepth, descDepthBytes,
	descInflight, descInflightBytes, descLastAck, descLagEntries, descLagSeconds, descReturns, descSuspends,
	descSlowSuspends, descStaleDrops, descProgress, descCurrent}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range stateDescs {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descCurrent, prometheus.GaugeValue, float64(c.p.CurrentLSN()))
	for _, s := range c.p.Targets() {
		g := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{s.ID}, labels...)...)
		}
		ctr := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), s.ID)
		}
		g(descConnected, b2f(s.Connected))
		g(descBlocked, b2f(s.Blocked))
		g(descInflight, float64(s.InFlightBatches))
		g(descInflightBytes, float64(s.InFlightBytes))
		if s.State == "" {
			continue // before the start handshake ended: no queue yet
		}
		g(descState, float64(stateNumber(s.State)))
		g(descTerm, float64(s.Term))
		g(descDepth, float64(s.NormalDepth), "normal")
		g(descDepth, float64(s.CatchupDepth), "catchup")
		g(descDepthBytes, float64(s.NormalBytes), "normal")
		g(descDepthBytes, float64(s.CatchupBytes), "catchup")
		g(descLastAck, float64(s.LastAck))
		g(descLagEntries, float64(s.LagEntries))
		g(descLagSeconds, s.LagSeconds)
		ctr(descReturns, s.Returns)
		ctr(descSuspends, s.Suspends)
		ctr(descSlowSuspends, s.SlowSuspends)
		ctr(descStaleDrops, s.StaleDrops)
		ctr(descProgress, s.ProgressMarkers)
	}
}

func stateNumber(s string) targetqueue.State {
	for st := targetqueue.Normal; st <= targetqueue.Suspended; st++ {
		if st.String() == s {
			return st
		}
	}
	return targetqueue.Suspended
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
