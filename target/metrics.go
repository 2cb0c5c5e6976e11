package target

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/metric"
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
	f := metric.With(reg, prometheus.Labels{"target": target})
	m := &metrics{
		appliedLSN: f.NewGauge(prometheus.GaugeOpts{Name: "target_applied_lsn", Help: "Durable applied LSN of the target (progress markers included)."}),
		epoch:      f.NewGauge(prometheus.GaugeOpts{Name: "target_epoch", Help: "Highest LogPlayer epoch the target has seen (persisted)."}),
		// 25µs .. ~1.6s: an fsync on the reference disk is 0.3-0.6 ms.
		applyDuration:   f.NewHistogram(prometheus.HistogramOpts{Name: "target_apply_duration_seconds", Help: "Duration of one Store.Apply call (one local durable transaction).", Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17)}),
		applyDeliveries: f.NewHistogram(prometheus.HistogramOpts{Name: "target_apply_batch_deliveries", Help: "Deliveries (LSNs, progress markers included) per Store.Apply call.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
		applyBatches:    f.NewHistogram(prometheus.HistogramOpts{Name: "target_apply_group_batches", Help: "Received batches grouped into one Store.Apply call (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 8)}),
		deliveryDelay:   f.NewHistogram(prometheus.HistogramOpts{Name: "target_delivery_delay_seconds", Help: "From LogPlayer dispatch (Batch.dispatched_unix_nano) to durable apply.", Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17)}),
		queueBatches:    f.NewGauge(prometheus.GaugeOpts{Name: "target_apply_queue_batches", Help: "Batches received and waiting for the applier (saturation of the apply loop)."}),
		queueBytes:      f.NewGauge(prometheus.GaugeOpts{Name: "target_apply_queue_bytes", Help: "Encoded bytes of the batches waiting for the applier (bounded by MaxQueueBytes)."}),
		refusals:        f.NewCounterVec(prometheus.CounterOpts{Name: "target_refusals_total", Help: "Streams or batches refused, by reason."}, []string{"reason"}),
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
