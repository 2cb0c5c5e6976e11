package logstore

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/logstore/tier"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Tiered storage (logstore/tier, `logplayer store --tier-url`): with
// Config.Tier set, the node runs the tier's uploader goroutine (until
// Close), retention deletes a sealed segment only once the tier holds it
// (RunRetention), and the segment log serves reads below its first LSN
// from the tier (segment.Below), so Read, ReadTopic, tail and the
// LogPlayer's catch-up reach back to the tier's oldest LSN.

// startTier builds the tier, hooks it under the segment log and starts its
// uploader. No-op without Config.Tier.
func (n *Node) startTier() error {
	if n.cfg.Tier == nil {
		return nil
	}
	tc := *n.cfg.Tier
	if tc.CacheDir == "" {
		tc.CacheDir = filepath.Join(n.cfg.Dir, "tier-cache")
	}
	tc.Node, tc.Logger = n.cfg.ID, n.log
	t, err := tier.New(tc)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := n.cfg.Registry.Register(newTierCollector(t, n.cfg.ID)); err != nil {
		return fmt.Errorf("logstore: metrics: %w", err)
	}
	n.tier = t
	n.seg.SetBelow(t)
	t.SetSnapshots(n.snaps)
	ctx, cancel := context.WithCancel(context.Background())
	n.wg.Add(2)
	go func() { defer n.wg.Done(); t.Run(ctx, n.seg) }()
	go func() { defer n.wg.Done(); <-n.closing; cancel() }()
	return nil
}

// tierHolds reports whether retention may delete the segment holding
// [first, last]: always without a tier, else once the tier holds it.
func (n *Node) tierHolds(first, last types.LSN) bool {
	return n.tier == nil || n.tier.Uploaded(first, last)
}

// statusTier fills the StatusResponse's tier fields.
func (n *Node) statusTier(resp *logstorepb.StatusResponse) {
	resp.LocalFirstLsn = uint64(n.seg.FirstLSN())
	resp.FirstLsn = uint64(n.seg.OldestReadable())
	if n.tier == nil {
		return
	}
	st := n.tier.Stats()
	resp.TierFirstLsn, resp.TierLastLsn = uint64(st.FirstLSN), uint64(st.LastLSN)
	resp.TierUploadedBytes = uint64(st.UploadedBytes)
	resp.TierLagSegments, resp.TierLagBytes = uint64(st.LagSegments), uint64(st.LagBytes)
}

// tierCollector exports tier.Stats at each scrape:
//
//   - logstore_tier_uploaded_bytes_total, logstore_tier_uploaded_segments_total:
//     verified uploads (segment, index and snapshot bytes) since the node started;
//   - logstore_tier_uploaded_snapshots_total: verified snapshot uploads
//     (their bytes are in logstore_tier_uploaded_bytes_total);
//   - logstore_tier_upload_errors_total: failed upload attempts (retried);
//   - logstore_tier_upload_lag_segments, logstore_tier_upload_lag_bytes:
//     sealed segments not yet uploaded (retention waits for them);
//   - logstore_tier_reads_total, logstore_tier_downloaded_bytes_total: segment
//     reads served from the tier, and bytes downloaded for them;
//   - logstore_tier_checksum_failures_total: objects whose size or SHA-256
//     differed from their manifest (never served).
type tierCollector struct {
	t     *tier.Tier
	descs []*prometheus.Desc
}

var tierMetricNames = []struct{ name, help string }{
	{"logstore_tier_uploaded_bytes_total", "Segment, index and snapshot bytes uploaded to tiered storage and verified."},
	{"logstore_tier_uploaded_segments_total", "Segments uploaded to tiered storage and verified."},
	{"logstore_tier_upload_errors_total", "Failed upload attempts to tiered storage (each retried with backoff)."},
	{"logstore_tier_upload_lag_segments", "Sealed segments not yet uploaded to tiered storage (retention keeps them)."},
	{"logstore_tier_upload_lag_bytes", "Bytes of sealed segments not yet uploaded to tiered storage."},
	{"logstore_tier_reads_total", "Segment reads served from tiered storage."},
	{"logstore_tier_downloaded_bytes_total", "Bytes downloaded from tiered storage for reads."},
	{"logstore_tier_checksum_failures_total", "Tiered storage objects that failed their checksum (not served)."},
	{"logstore_tier_uploaded_snapshots_total", "Raft snapshots uploaded to tiered storage and verified."},
}

func newTierCollector(t *tier.Tier, node string) *tierCollector {
	c := &tierCollector{t: t}
	for _, m := range tierMetricNames {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, prometheus.Labels{"node": node}))
	}
	return c
}

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.t.Stats()
	vals := []int64{st.UploadedBytes, st.UploadedSegments, st.UploadErrors, st.LagSegments, st.LagBytes,
		st.Reads, st.DownloadedBytes, st.ChecksumFailures, st.UploadedSnapshots}
	for i, v := range vals {
		kind := prometheus.CounterValue
		if i == 3 || i == 4 {
			kind = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], kind, float64(v))
	}
}
