package logstore_test

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestSnapshotStreamSurvivesNewerSnapshots: a snapshot being streamed (as
// to a follower by InstallSnapshot) is not deleted when newer snapshots
// push it out of the retained set; the stream completes with every byte,
// and the snapshot is reaped once its reader closes. Before pinning, the
// reap after the second newer snapshot removed the directory and the
// stream failed with "no such file or directory" at the next segment file.
func TestSnapshotStreamSurvivesNewerSnapshots(t *testing.T) {
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.SegmentBytes = 16 << 10
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 32, 8, 20*time.Millisecond
	})
	cl := newClient(t, c.addrs()...)
	n := c.Nodes[0]
	big := bytes.Repeat([]byte("x"), 2<<10)
	write := func(prefix string, count int) {
		for i := range count {
			req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "big",
				Messages: []*logstorepb.Message{{Key: []byte(fmt.Sprintf("%s-%d", prefix, i)), Value: big}}}}}
			if _, err := cl.Append(ctxT(t, 30*time.Second), req); err != nil {
				t.Fatal(err)
			}
		}
	}
	// ~1.5 MiB of records: the archive is far larger than what the
	// archive writer buffers (256 KiB), so most segment files are opened
	// only after the reader resumes.
	write("a", 750)
	testwait.For(t, 30*time.Second, "a snapshot of the first load", func() bool {
		return len(logstore.SnapshotIDsForTest(n)) > 0
	})
	id, size, rc, err := logstore.OpenNewestSnapshotForTest(n)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 4<<10)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}

	// Two newer snapshots: id is no longer among the retained two.
	before := logstore.SnapshotIDsForTest(n)
	round := 0
	testwait.For(t, 60*time.Second, "two snapshots newer than the open one", func() bool {
		newer := 0
		for _, s := range logstore.SnapshotIDsForTest(n) {
			if !slices.Contains(before, s) {
				newer++
			}
		}
		if newer >= 2 {
			return true
		}
		round++
		write(fmt.Sprintf("b%d", round), 40)
		return false
	})

	rest, err := io.Copy(io.Discard, rc)
	if err != nil {
		t.Fatalf("streaming snapshot %s after newer snapshots: %v", id, err)
	}
	if got := int64(len(head)) + rest; got != size {
		t.Fatalf("snapshot %s streamed %d bytes, meta says %d", id, got, size)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the closed snapshot reaped", func() bool {
		return !slices.Contains(logstore.SnapshotIDsForTest(n), id)
	})
}
