package logstore_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
)

// TestNewVoterJoinsUnderLoad: a fourth voter is added while 64 clients
// write for 30 s and snapshots are taken every few hundred entries, so the
// snapshot it is sent is outdated by newer ones while it streams (before
// snapshots were pinned, reap deleted it mid-stream and every retry
// started over from a newer one that met the same fate). The new voter
// must reach the head and hold byte-identical segment files.
//
// The Raft log is raft-boltdb's: it deletes compacted entries, so once the
// leader has snapshotted (waited for before the voter is added) the
// voter's first AppendEntries finds no entry 1 and Raft sends
// InstallSnapshot. raft-wal v0.4.2 keeps compacted entries in the segment
// files it keeps; logstore/raftstore.go:walLogStore hides them, and
// raftstore_join_test.go:TestNewVoterAfterCompactionGetsSnapshotWAL checks
// the same join on raft-wal.
func TestNewVoterJoinsUnderLoad(t *testing.T) {
	const writers, loadFor = 64, 30 * time.Second
	tweak := func(cfg *logstore.Config) {
		cfg.SegmentBytes = 16 << 10
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 20*time.Millisecond
		cfg.RaftLogStore = logstore.RaftLogBoltDB
	}
	c := startCluster(t, 3, tweak)
	cl := newClient(t, c.addrs()...)

	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		acked   atomic.Int64
		failed  atomic.Int64
		lastErr atomic.Value
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := txnReq(fmt.Sprintf("j%d-%d", w, i)+string(bytes.Repeat([]byte("v"), 200)), fmt.Sprintf("t%d", w%4), "all")
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cl.Append(ctx, req)
				cancel()
				if err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
					continue
				}
				acked.Add(1)
			}
		}()
	}
	loadDone := time.After(loadFor)
	// Let the log grow past a few snapshots, then add the voter mid-load.
	// (120 s: at load 14 on two cores 15,000 took longer than 60 s once.)
	testwait.For(t, 120*time.Second, "load past several snapshots", func() bool { return acked.Load() > 15000 })
	// The leader's log is compacted (a snapshot at index > 0, and more
	// than TrailingLogs entries after it): entry 1 is gone, so the new
	// voter can only start from a snapshot.
	testwait.For(t, 60*time.Second, "the leader's Raft log compacted", func() bool {
		st := c.WaitLeader().Raft().Stats()
		snap, _ := strconv.ParseUint(st["last_snapshot_index"], 10, 64)
		last, _ := strconv.ParseUint(st["last_log_index"], 10, 64)
		return snap > 0 && last > 16
	})
	st := c.WaitLeader().Raft().Stats()
	t.Logf("adding n3: the leader's last_log_index %s, last_snapshot_index %s", st["last_log_index"], st["last_snapshot_index"])

	n3, cfg := startJoiner(t, "n3", tweak)
	if err := cl.AddVoter(ctxT(t, 60*time.Second), "n3", cfg.RaftAddr, cfg.APIAddr); err != nil {
		t.Fatal(err)
	}
	<-loadDone
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Logf("%d appends failed under load (last: %v); %d acknowledged", n, lastErr.Load(), acked.Load())
	}
	if acked.Load() < 4000 {
		t.Fatalf("only %d appends acknowledged in %v", acked.Load(), loadFor)
	}

	leader := c.WaitLeader()
	head := leader.HeadLSN()
	testwait.For(t, 120*time.Second, "the new voter reaches the head", func() bool { return n3.HeadLSN() >= head })
	if got := snapshotDirs(t, cfg.Dir); len(got) == 0 {
		t.Fatal("the new voter received no snapshot (was the Raft log compacted?)")
	}
	// Byte-identical segment files from the new voter's first segment on.
	for _, n := range append(c.Nodes, n3) {
		testwait.For(t, 60*time.Second, "every node at the head", func() bool { return n.HeadLSN() >= head })
		if err := n.SegmentLog().Sync(); err != nil {
			t.Fatal(err)
		}
	}
	got := segmentFiles(t, cfg.Dir)
	want := segmentFiles(t, c.Configs[0].Dir)
	var names []string
	for name := range got {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) < 3 || len(names) != len(want) {
		t.Fatalf("the new voter has %d segment files, n0 %d", len(names), len(want))
	}
	for _, name := range names {
		if !bytes.Equal(got[name], want[name]) {
			t.Fatalf("segment file %s differs between n0 (%d bytes) and the new voter (%d bytes)", name, len(want[name]), len(got[name]))
		}
	}
	t.Logf("%d appends acknowledged, head %d, new voter holds %d identical segment files", acked.Load(), head, len(names))
}
