package logstore_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// TestNewVoterAfterCompactionGetsSnapshotWAL: on raft-wal (the default Raft
// log store), a voter added once the leader's Raft log is compacted is
// sent a snapshot, as on raft-boltdb (joinload_test.go), not the log from
// index 1. The new voter takes no snapshot of its own (threshold and
// interval out of reach), so a snapshot in its directory was received.
// Failed before the fix in raftstore.go: raft-wal v0.4.2 still returned the
// compacted entries that lie in a segment it keeps, the leader replayed
// them all and the new voter reached the head without any snapshot.
func TestNewVoterAfterCompactionGetsSnapshotWAL(t *testing.T) {
	tweak := func(cfg *logstore.Config) {
		cfg.RaftLogStore = logstore.RaftLogWAL
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 20*time.Millisecond
	}
	c := startCluster(t, 3, tweak)
	cl := newClient(t, c.addrs()...)
	for i := range 300 {
		if _, err := cl.Append(ctxT(t, 30*time.Second), txnReq(fmt.Sprintf("c%d", i), "t")); err != nil {
			t.Fatal(err)
		}
	}
	testwait.ForErr(t, testwait.Max, "the leader's Raft log compacted", func() error {
		first, err := logstore.RaftFirstIndexForTest(c.WaitLeader())
		if err == nil && first <= 1 {
			err = fmt.Errorf("first index %d", first)
		}
		return err
	})

	n3, cfg := startJoiner(t, "n3", func(cfg *logstore.Config) {
		tweak(cfg)
		cfg.SnapshotThreshold, cfg.SnapshotInterval = 1<<40, 24*time.Hour
	})
	if err := cl.AddVoter(ctxT(t, testwait.Max), "n3", cfg.RaftAddr, cfg.APIAddr); err != nil {
		t.Fatal(err)
	}
	head := c.WaitLeader().HeadLSN()
	testwait.For(t, testwait.Max, "the new voter reaches the head", func() bool { return n3.HeadLSN() >= head })
	if got := snapshotDirs(t, cfg.Dir); len(got) == 0 {
		first, _ := logstore.RaftFirstIndexForTest(c.WaitLeader())
		t.Fatalf("the new voter reached LSN %d without a snapshot: the leader (Raft log first index %d) replayed its log from index 1", head, first)
	}
}

// startJoiner starts node id outside the cluster's configuration (add it
// with AddVoter), on fresh listeners and its own directory, served until
// the test ends, then closed.
func startJoiner(t testing.TB, id string, tweak func(*logstore.Config)) (*logstore.Node, logstore.Config) {
	t.Helper()
	rl, al := listen(t), listen(t)
	cfg := testConfig(id, filepath.Join(t.TempDir(), id))
	if tweak != nil {
		tweak(&cfg)
	}
	cfg.RaftAddr, cfg.APIAddr = rl.Addr().String(), al.Addr().String()
	cfg.RaftListener = rl
	n, err := logstore.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logstoretest.Serve(t, n, al)
	t.Cleanup(func() { n.Close() })
	return n, cfg
}
