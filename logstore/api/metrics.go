package api

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/internal/metric"
)

// LatencyBuckets are sub-millisecond to seconds, for append, commit and
// apply latencies (the node's histograms use them too).
var LatencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005,
	0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
}

// Metrics are the edge's Prometheus collectors, labelled with the node.
type Metrics struct {
	appendDuration *prometheus.HistogramVec // by result code
	// appendOK is appendDuration's OK child, looked up once, at the first
	// answered Append (so the series appears then, as it always did):
	// WithLabelValues hashes the label and takes the vector's lock.
	appendOK     prometheus.Observer
	appendOKOnce sync.Once
	// appendBatchRequests is requests per AppendBatch call.
	appendBatchRequests prometheus.Histogram
	readStreams         prometheus.Gauge
	// producerRefusals counts the registered-producer refusals this node
	// answered as the leader, by code (producerRefusalCodes).
	producerRefusals *prometheus.CounterVec
	batchTxns        prometheus.Histogram
	batchBytes       prometheus.Histogram
	intakeDepth      prometheus.Gauge
	intakeBytes      prometheus.Gauge
	inflightEntries  prometheus.Gauge
	commitDuration   prometheus.Histogram
}

// NewMetrics registers the edge's collectors for node on reg.
func NewMetrics(reg prometheus.Registerer, node string) (*Metrics, error) {
	f := metric.With(reg, prometheus.Labels{"node": node})
	m := &Metrics{
		appendDuration:      f.NewHistogramVec(prometheus.HistogramOpts{Name: "logstore_append_duration_seconds", Help: "Append latency at the leader, from intake to apply result, by result code.", Buckets: LatencyBuckets}, []string{"code"}),
		appendBatchRequests: f.NewHistogram(prometheus.HistogramOpts{Name: "logstore_append_batch_requests", Help: "Requests per AppendBatch call (clients coalescing concurrent Appends).", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		readStreams:         f.NewGauge(prometheus.GaugeOpts{Name: "logstore_read_streams", Help: "Open Read and ReadTopic streams."}),
		producerRefusals:    f.NewCounterVec(prometheus.CounterOpts{Name: "logstore_producer_refusals_total", Help: "Registered-producer refusals answered by this node as the leader, by code: unknown_producer, producer_fenced, table_full (InitProducer), sequence_too_old, sequence_reused."}, []string{"code"}),
		batchTxns:           f.NewHistogram(prometheus.HistogramOpts{Name: "logstore_aggregation_batch_txns", Help: "Commands per Raft entry written by the aggregator.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		batchBytes:          f.NewHistogram(prometheus.HistogramOpts{Name: "logstore_aggregation_batch_bytes", Help: "Encoded bytes per Raft entry written by the aggregator.", Buckets: prometheus.ExponentialBuckets(256, 4, 10)}),
		intakeDepth:         f.NewGauge(prometheus.GaugeOpts{Name: "logstore_intake_queue_depth", Help: "Requests waiting in the leader's intake queue."}),
		intakeBytes:         f.NewGauge(prometheus.GaugeOpts{Name: "logstore_intake_queue_bytes", Help: "Encoded bytes of the requests waiting in the leader's intake queue (bound: IntakeQueueBytes)."}),
		inflightEntries:     f.NewGauge(prometheus.GaugeOpts{Name: "logstore_inflight_entries", Help: "Raft entries the aggregator has in flight."}),
		commitDuration:      f.NewHistogram(prometheus.HistogramOpts{Name: "logstore_raft_commit_duration_seconds", Help: "From raft.Apply to the entry's apply result at the leader.", Buckets: LatencyBuckets}),
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	for _, c := range producerRefusalCodes {
		m.producerRefusals.WithLabelValues(producerRefusalLabel(c)) // exported at 0 from the start
	}
	return m, nil
}

// appendAnswered records one Append's answer (an AppendBatch's request
// included): its latency by result code, and a producer refusal.
func (m *Metrics) appendAnswered(err error, took time.Duration) {
	if err == nil {
		m.appendOKOnce.Do(func() { m.appendOK = m.appendDuration.WithLabelValues(codes.OK.String()) })
		m.appendOK.Observe(took.Seconds())
		return
	}
	m.appendDuration.WithLabelValues(status.Code(err).String()).Observe(took.Seconds())
	m.countProducerRefusal(err)
}
