package logstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/logstore/segment"
)

// segmentCollector exports the segment log's own counters (segment.Stats:
// seals and recovery truncations), read at each scrape, so the writer
// keeps its atomics and pays nothing per record.
//
//   - logstore_segment_seal_duration_seconds: a summary without quantiles
//     (_count seals since the node started, _sum the seconds they took,
//     fsyncs of the apply path included); rate(_sum)/rate(_count) is the
//     mean seal time.
//   - logstore_segment_truncated_bytes_total: torn or corrupt tail bytes
//     recovery cut from the active segment.
//   - logstore_segment_truncated_records_total: records recovery dropped
//     after the snapshot's Raft index (Raft applies them again).
type segmentCollector struct {
	log                       *segment.Log
	seal, truncBytes, truncRe *prometheus.Desc
}

func newSegmentCollector(log *segment.Log, node string) *segmentCollector {
	labels := prometheus.Labels{"node": node}
	return &segmentCollector{
		log: log,
		seal: prometheus.NewDesc("logstore_segment_seal_duration_seconds",
			"Time to seal a full segment (fsync of the segment and its index), count and sum since the node started.", nil, labels),
		truncBytes: prometheus.NewDesc("logstore_segment_truncated_bytes_total",
			"Bytes of torn or corrupt tail that recovery cut from the active segment.", nil, labels),
		truncRe: prometheus.NewDesc("logstore_segment_truncated_records_total",
			"Records recovery dropped after the snapshot's Raft index (Raft applies them again).", nil, labels),
	}
}

func (c *segmentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.seal
	ch <- c.truncBytes
	ch <- c.truncRe
}

func (c *segmentCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.log.Stats()
	ch <- prometheus.MustNewConstSummary(c.seal, st.Seals, st.SealTime.Seconds(), nil)
	ch <- prometheus.MustNewConstMetric(c.truncBytes, prometheus.CounterValue, float64(st.TruncatedBytes))
	ch <- prometheus.MustNewConstMetric(c.truncRe, prometheus.CounterValue, float64(st.TruncatedRecords))
}
