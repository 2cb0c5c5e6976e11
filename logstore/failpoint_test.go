//go:build failpoints

package logstore_test

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/segment"
)

// TestSnapshotDiskFaults (go test -tags failpoints): when the snapshot
// writer or the segment log cannot fsync, the snapshot fails with an error
// and none is published, so Raft keeps its log (it compacts only below a
// snapshot that completed). A snapshot-file fault is not sticky: the next
// snapshot after it clears succeeds. A segment fsync fault is (the segment
// log returns ErrNotDurable from then on; the next apply would stop the
// node), so that case ends the test's use of the node.
func TestSnapshotDiskFaults(t *testing.T) {
	for _, tc := range []struct {
		point  string
		sticky bool
	}{{failpoint.SnapshotSync, false}, {failpoint.SegmentSync, true}} {
		t.Run(tc.point, func(t *testing.T) {
			c := startCluster(t, 1, func(cfg *logstore.Config) {
				cfg.SnapshotThreshold, cfg.SnapshotInterval = 1<<20, time.Hour
			})
			cl := newClient(t, c.addrs()...)
			n := c.Nodes[0]
			for i := range 20 {
				if _, err := cl.Append(ctxT(t, 30*time.Second), txnReq(fmt.Sprint(i), "t")); err != nil {
					t.Fatal(err)
				}
			}
			before := logstore.SnapshotIDsForTest(n)
			failpoint.Enable(tc.point, failpoint.Action{Err: syscall.EIO})
			err := n.Raft().Snapshot().Error()
			failpoint.Disable(tc.point)
			if err == nil {
				t.Fatal("a snapshot succeeded while its files could not be fsynced")
			}
			// hashicorp/raft flattens the error to text.
			if tc.sticky && !strings.Contains(err.Error(), segment.ErrNotDurable.Error()) {
				t.Fatalf("snapshot error %v does not say the segment log is not durable", err)
			}
			if got := logstore.SnapshotIDsForTest(n); !slices.Equal(got, before) {
				t.Fatalf("snapshots %v after a failed snapshot, want %v", got, before)
			}
			err = n.Raft().Snapshot().Error()
			if tc.sticky {
				if err == nil {
					t.Fatal("a snapshot succeeded after the segment log failed to fsync")
				}
				return
			}
			if err != nil {
				t.Fatalf("snapshot after the fault cleared: %v", err)
			}
			if got := logstore.SnapshotIDsForTest(n); len(got) != len(before)+1 {
				t.Fatalf("snapshots %v, want one more than %v", got, before)
			}
		})
	}
}

// TestRaftLogStoreFaultIsNotAcked: while the Raft log store cannot append
// (raft-wal and raft-boltdb alike), no Append is acknowledged and the head
// does not move; once the fault clears the node serves again.
func TestRaftLogStoreFaultIsNotAcked(t *testing.T) {
	for _, backend := range []logstore.RaftLogStore{logstore.RaftLogWAL, logstore.RaftLogBoltDB} {
		t.Run(string(backend), func(t *testing.T) {
			c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.RaftLogStore = backend })
			cl := newClient(t, c.addrs()...)
			n := c.Nodes[0]
			for i := range 5 {
				if _, err := cl.Append(ctxT(t, 30*time.Second), txnReq(fmt.Sprint(i), "t")); err != nil {
					t.Fatal(err)
				}
			}
			head := n.HeadLSN()
			failpoint.Enable(failpoint.RaftStoreLogs, failpoint.Action{Err: syscall.EIO})
			_, err := cl.Append(ctxT(t, 2*time.Second), txnReq("not durable", "t"))
			hits := failpoint.Hits(failpoint.RaftStoreLogs)
			moved := n.HeadLSN()
			failpoint.Disable(failpoint.RaftStoreLogs)
			if err == nil {
				t.Fatal("an Append was acknowledged while the Raft log could not store it")
			}
			if hits == 0 || moved != head {
				t.Fatalf("fault hit %d times, head %d -> %d while the Raft log failed", hits, head, moved)
			}
			for i := range 3 {
				if _, err := cl.Append(ctxT(t, 30*time.Second), txnReq(fmt.Sprint("after", i), "t")); err != nil {
					t.Fatalf("Append after the fault cleared: %v", err)
				}
			}
			// The refused Append's outcome was unknown to the client: it may
			// have landed once after the fault cleared, never twice.
			if got := n.HeadLSN(); got != head+3 && got != head+4 {
				t.Fatalf("head %d after 3 more appends from %d", got, head)
			}
		})
	}
}
