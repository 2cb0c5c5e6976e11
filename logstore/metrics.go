package logstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/metric"
	"github.com/logplayer/logplayer/logstore/api"
)

// latencyBuckets are sub-millisecond to seconds, for append/commit/apply.
var latencyBuckets = api.LatencyBuckets

// metrics are a node's Prometheus collectors, registered on Config.Registry.
type metrics struct {
	applyDuration    prometheus.Histogram
	headLSN          prometheus.Gauge
	firstLSN         prometheus.Gauge
	segmentBytes     prometheus.Gauge
	retentionDeleted prometheus.Counter
	forcedDeletes    prometheus.Counter
	snapshotDuration prometheus.Histogram
	snapshotBytes    prometheus.Gauge
	// snapshotOrphanBytes is what the snapshot store holds on disk that
	// no snapshot accounts for (snapshotStore.countOrphans).
	snapshotOrphanBytes prometheus.Gauge
	isLeader            prometheus.Gauge
	// registeredProducers is the rows of the registered producer table
	// (InitProducer), set after every apply on every node.
	registeredProducers prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, node string) (*metrics, error) {
	f := metric.With(reg, prometheus.Labels{"node": node})
	m := &metrics{
		applyDuration:       f.NewHistogram(prometheus.HistogramOpts{Name: "logstore_apply_duration_seconds", Help: "FSM apply time of one Raft entry.", Buckets: latencyBuckets}),
		headLSN:             f.NewGauge(prometheus.GaugeOpts{Name: "logstore_head_lsn", Help: "Highest visible LSN."}),
		firstLSN:            f.NewGauge(prometheus.GaugeOpts{Name: "logstore_first_lsn", Help: "Oldest retained LSN."}),
		segmentBytes:        f.NewGauge(prometheus.GaugeOpts{Name: "logstore_segment_bytes", Help: "Bytes of segment and index files on disk: the log plus what only snapshots hold (each file once, however many links)."}),
		retentionDeleted:    f.NewCounter(prometheus.CounterOpts{Name: "logstore_retention_deleted_bytes_total", Help: "Bytes retention freed on disk (log segments and the snapshot links to them)."}),
		forcedDeletes:       f.NewCounter(prometheus.CounterOpts{Name: "logstore_retention_forced_deletes_total", Help: "Retention runs that deleted data a delivery consumer had not acked, forced by the byte or age cap."}),
		snapshotDuration:    f.NewHistogram(prometheus.HistogramOpts{Name: "logstore_snapshot_persist_duration_seconds", Help: "Time to persist one snapshot (checkpoint + state).", Buckets: latencyBuckets}),
		snapshotBytes:       f.NewGauge(prometheus.GaugeOpts{Name: "logstore_snapshot_bytes", Help: "Bytes a transfer of the newest snapshot streams (state + retained segments)."}),
		snapshotOrphanBytes: f.NewGauge(prometheus.GaugeOpts{Name: "logstore_snapshot_orphan_bytes", Help: "Bytes under snapshots/ that no snapshot accounts for (a removal that failed, a directory without a valid meta.json); crash leftovers are removed at start."}),
		isLeader:            f.NewGauge(prometheus.GaugeOpts{Name: "logstore_is_leader", Help: "1 when this node is the Raft leader."}),
		registeredProducers: f.NewGauge(prometheus.GaugeOpts{Name: "logstore_registered_producers", Help: "Rows of the registered producer table (InitProducer; cap MaxProducers)."}),
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
