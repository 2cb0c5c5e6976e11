package target

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the target_… series of one Server, labelled with its target id
// so several targets can share a registry (dev mode runs many shards in one
// process).
type metrics struct {
	appliedLSN      prometheus.Gauge
	epoch           prometheus.Gauge
	applyDuration   prometheus.Histogram
	applyDeliveries prometheus.Histogram
	applyBatches    prometheus.Histogram
	deliveryDelay   prometheus.Histogram
	queueBatches    prometheus.Gauge
	queueBytes      prometheus.Gauge
	refusals        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, target string) (*metrics, error) {
	labels := prometheus.Labels{"target": target}
	m := &metrics{
		appliedLSN: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "target_applied_lsn", ConstLabels: labels,
			Help: "Durable applied LSN of the target (progress markers included).",
		}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "target_epoch", ConstLabels: labels,
			Help: "Highest LogPlayer epoch the target has seen (persisted).",
		}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "target_apply_duration_seconds", ConstLabels: labels,
			Help: "Duration of one Store.Apply call (one local durable transaction).",
			// 25µs .. ~1.6s: an fsync on the reference disk is 0.3-0.6 ms.
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17),
		}),
		applyDeliveries: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "target_apply_batch_deliveries", ConstLabels: labels,
			Help:    "Deliveries (LSNs, progress markers included) per Store.Apply call.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		applyBatches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "target_apply_group_batches", ConstLabels: labels,
			Help:    "Received batches grouped into one Store.Apply call (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 8),
		}),
		deliveryDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "target_delivery_delay_seconds", ConstLabels: labels,
			Help:    "From LogPlayer dispatch (Batch.dispatched_unix_nano) to durable apply.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17),
		}),
		queueBatches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "target_apply_queue_batches", ConstLabels: labels,
			Help: "Batches received and waiting for the applier (saturation of the apply loop).",
		}),
		queueBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "target_apply_queue_bytes", ConstLabels: labels,
			Help: "Encoded bytes of the batches waiting for the applier (bounded by MaxQueueBytes).",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "target_refusals_total", ConstLabels: labels,
			Help: "Streams or batches refused, by reason.",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.appliedLSN, m.epoch, m.applyDuration, m.applyDeliveries,
		m.applyBatches, m.deliveryDelay, m.queueBatches, m.queueBytes, m.refusals} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
