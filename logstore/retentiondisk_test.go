package logstore_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// segmentDataOnDisk is what du would say of a node's segment data: every
// regular file under segments/ and snapshots/*/data/, each inode once.
func segmentDataOnDisk(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed meanwhile
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		inSegments := strings.HasPrefix(rel, "segments"+string(filepath.Separator))
		inSnapData := strings.HasPrefix(rel, "snapshots"+string(filepath.Separator)) &&
			strings.Contains(rel, string(filepath.Separator)+"data"+string(filepath.Separator))
		if !d.Type().IsRegular() || !(inSegments || inSnapData) {
			return nil
		}
		fi, err := os.Stat(path)
		if err != nil {
			return nil
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if !seen[ino] {
			seen[ino] = true
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// loadPastBudget appends count 1 KiB messages to topic r and waits for two
// snapshots of the load on n.
func loadPastBudget(t *testing.T, cl *client.Client, n *logstore.Node, count int) {
	t.Helper()
	big := bytes.Repeat([]byte("r"), 1<<10)
	for i := range count {
		req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "r",
			Messages: []*logstorepb.Message{{Key: []byte(fmt.Sprint(i)), Value: big}}}}}
		if _, err := cl.Append(ctxT(t, 30*time.Second), req); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 30*time.Second, "snapshots of the load", func() bool {
		return len(logstore.SnapshotIDsForTest(n)) >= 2
	})
}

// TestRetentionFreesDiskWhenIdle: fill a node far past its retention
// budget, then stop writing. Retention must bring the segment data really
// on disk (log plus snapshot links, each file once) under the budget
// without any new snapshot, and logstore_segment_bytes must say so. The
// one allowance: each retained snapshot (2) holds a copy of the prefix of
// the segment that was active when it was taken, at most SegmentBytes,
// which only reaping frees. Before
// snapshots were trimmed, the deleted segments stayed on disk through the
// snapshots' hard links until two newer snapshots existed, which an idle
// cluster never takes.
func TestRetentionFreesDiskWhenIdle(t *testing.T) {
	const budget, segBytes = 256 << 10, 16 << 10
	reg := prometheus.NewRegistry()
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.Registry = reg
		cfg.SegmentBytes = segBytes
		cfg.RetentionBytes, cfg.RetentionInterval = budget, 50*time.Millisecond
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 8, 20*time.Millisecond
	})
	cl := newClient(t, c.addrs()...)
	n := c.Nodes[0]
	loadPastBudget(t, cl, n, 1500) // ~1.5 MiB, 6x the budget
	// Idle from here: the last snapshot covers (almost) everything, and
	// no new one will be taken once Raft has nothing new to snapshot.
	dir := c.Configs[0].Dir
	testwait.For(t, 60*time.Second, "segment data on disk under the budget", func() bool {
		return segmentDataOnDisk(t, dir) <= budget+2*segBytes
	})
	onDisk := segmentDataOnDisk(t, dir)
	testwait.For(t, 10*time.Second, "logstore_segment_bytes under the budget", func() bool {
		got := testmetric.Value(t, reg, "logstore_segment_bytes", nil)
		return got > 0 && got <= budget && int64(got) <= segmentDataOnDisk(t, dir)
	})
	if first := n.SegmentLog().FirstLSN(); first <= 1 {
		t.Fatalf("retention deleted nothing (first lsn %d, %d bytes on disk)", first, onDisk)
	}
}

// TestRetentionByBytesOnConfigFS: retention by bytes measures the segment
// data on Config.FS, the filesystem the node writes, not the OS's: on a
// node whose data is on a MemFS (as in the power-loss tests), a log past
// its byte budget is cut back under it.
func TestRetentionByBytesOnConfigFS(t *testing.T) {
	const budget, segBytes = 64 << 10, 16 << 10
	reg := prometheus.NewRegistry()
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.FS, cfg.RaftLogStore, cfg.Registry = vfs.NewCrashableMem(), logstore.RaftLogWAL, reg
		cfg.SegmentBytes, cfg.RetentionBytes = segBytes, budget // RetentionInterval: an hour; the test runs it
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 8, 20*time.Millisecond
	})
	cl := newClient(t, c.addrs()...)
	n := c.Nodes[0]
	loadPastBudget(t, cl, n, 400) // ~400 KiB, 6x the budget
	freed, err := n.RunRetention()
	if err != nil {
		t.Fatalf("RunRetention on a MemFS node: %v", err)
	}
	if first := n.SegmentLog().FirstLSN(); freed <= 0 || first <= 1 {
		t.Fatalf("retention freed %d bytes, first lsn %d", freed, first)
	}
	if got := testmetric.Value(t, reg, "logstore_segment_bytes", nil); got <= 0 || got > budget {
		t.Fatalf("logstore_segment_bytes %v after retention, budget %d", got, budget)
	}
}
