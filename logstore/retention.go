package logstore

import (
	"time"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/types"
)

// retentionLoop applies retention every Config.RetentionInterval until
// Close.
func (n *Node) retentionLoop() {
	t := time.NewTicker(n.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
			if _, err := n.RunRetention(); err != nil {
				n.log.Warn("retention", "err", err)
			}
		}
	}
}

// RunRetention applies the retention policy once and returns the bytes it
// freed on disk. Oldest sealed segments go while the segment data on disk
// (segmentDiskBytes: the log plus what only snapshots still hold) is over
// RetentionBytes or their newest record is older than RetentionAge, but:
//   - never above the newest durable snapshot (data above it may be cut and
//     re-applied at restart, so the log must still reach back to it);
//   - never a segment holding an LSN a registered delivery consumer has not
//     acked (the floor), unless RetentionCapBytes or RetentionCapAge forces
//     it: then it goes anyway, with a warning and
//     logstore_retention_forced_deletes_total.
//
// Deleted segments are also dropped from the local snapshots that link them
// (snapshotStore.trimBefore), so the space is really freed, with no newer
// snapshot needed: an idle cluster frees it too.
//
// Retention is local to each node (it is not part of the replicated state).
func (n *Node) RunRetention() (int64, error) {
	// Links to segments an earlier run deleted while their snapshot was
	// being streamed.
	if err := n.snaps.trimBefore(n.seg.FirstLSN()); err != nil {
		return 0, err
	}
	before, err := n.segmentDiskBytes()
	if err != nil {
		return 0, err
	}
	floor, hasFloor := types.LSN(0), false
	n.fsm.withState(func(st *fsm.State) { floor, hasFloor = st.MinConsumerLSN() })
	durable := n.durableLSN.Load()
	now := n.cfg.Now()
	size := before
	segs := n.seg.Segments()
	cut, forced := types.LSN(0), 0
	for _, s := range segs {
		if !s.Sealed || s.LastLSN < s.FirstLSN || s.LastLSN > durable {
			break
		}
		age := now.Sub(s.LastTime)
		if size <= n.cfg.RetentionBytes && age <= n.cfg.RetentionAge {
			break
		}
		if !n.tierHolds(s.FirstLSN, s.LastLSN) {
			// Not uploaded (and verified) yet: it stays, whatever the
			// caps say; logstore_tier_upload_lag_* shows the wait.
			n.log.Debug("retention waits for the tier upload", "segment", s.Name, "lsn", s.LastLSN)
			break
		}
		if hasFloor && s.LastLSN > floor {
			if size <= n.cfg.RetentionCapBytes && age <= n.cfg.RetentionCapAge {
				break
			}
			forced++
			n.log.Warn("retention cap forces deleting data a delivery consumer has not acked",
				"segment", s.Name, "lsn", s.LastLSN, "floor", floor, "bytes", size, "age", age)
		}
		cut = s.LastLSN + 1
		size -= s.Bytes
	}
	if cut > 0 {
		if _, err := n.seg.DeleteBefore(cut); err != nil {
			return 0, err
		}
		if err := n.snaps.trimBefore(n.seg.FirstLSN()); err != nil {
			return 0, err
		}
	}
	after, err := n.segmentDiskBytes()
	if err != nil {
		return 0, err
	}
	freed := max(before-after, 0)
	if cut > 0 {
		n.metrics.retentionDeleted.Add(float64(freed))
		if forced > 0 {
			n.metrics.forcedDeletes.Add(float64(forced))
		}
		n.log.Info("retention deleted segments", "before_lsn", cut, "bytes", freed, "forced", forced)
	}
	n.metrics.firstLSN.Set(float64(n.seg.FirstLSN()))
	n.metrics.segmentBytes.Set(float64(after))
	return freed, nil
}
