package logstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func snapshotDirs(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, filepath.Join(dir, "snapshots", e.Name()))
		}
	}
	return out
}

func sameTxns(t testing.TB, a, b []*logstorepb.Transaction) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d txns vs %d", len(a), len(b))
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("txn %d differs: %v vs %v", i+1, a[i], b[i])
		}
	}
}

// TestSnapshotRestartAndJoin: snapshots hard-link sealed segments; a full
// cluster restart recovers state (producer table, offsets) from snapshots
// plus replay; a new voter added after Raft compacted its log receives all
// retained data and the state through InstallSnapshot.
func TestSnapshotRestartAndJoin(t *testing.T) {
	for _, backend := range logstoretest.RaftLogStores {
		t.Run(string(backend), func(t *testing.T) { testSnapshotRestartAndJoin(t, backend) })
	}
}

func testSnapshotRestartAndJoin(t *testing.T, backend logstore.RaftLogStore) {
	c := startCluster(t, 3, func(cfg *logstore.Config) {
		cfg.AllowLegacyProducers = true // the "prod" producer below
		cfg.RaftLogStore = backend
		cfg.SegmentBytes = 4 << 10
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 16, 4, 50*time.Millisecond
	})
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 120*time.Second)
	var last *logstorepb.AppendRequest
	var lastResp *logstorepb.AppendResponse
	for i := range 200 {
		req := txnReq(fmt.Sprintf("s%03d", i)+strings.Repeat("d", 60), "a", fmt.Sprintf("b%d", i%3))
		req.ProducerId, req.Sequence = "prod", uint64(i+1)
		req.OffsetCommits = []*logstorepb.OffsetCommit{{Group: "g", Topic: "in", Offset: uint64(i)}}
		resp, err := cl.Append(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		last, lastResp = req, resp
	}
	top := lastResp.Lsn
	for i, n := range c.Nodes {
		testwait.For(t, 60*time.Second, "caught up", func() bool { return uint64(n.HeadLSN()) >= top })
		testwait.For(t, 60*time.Second, "a snapshot", func() bool { return len(snapshotDirs(t, c.Configs[i].Dir)) > 0 })
	}
	// Sealed segments in a snapshot are hard links of the log's files.
	linked := false
	for _, sd := range snapshotDirs(t, c.Configs[0].Dir) {
		entries, _ := os.ReadDir(filepath.Join(sd, "data"))
		for _, e := range entries {
			a, err1 := os.Stat(filepath.Join(sd, "data", e.Name()))
			b, err2 := os.Stat(filepath.Join(c.Configs[0].Dir, "segments", e.Name()))
			if err1 == nil && err2 == nil && os.SameFile(a, b) {
				linked = true
			}
		}
	}
	if !linked {
		t.Fatal("no snapshot file is a hard link of a segment file")
	}
	want := readAll(t, c.Nodes[0].APIAddr(), top)

	// Restart the whole cluster: every node recovers from its snapshot.
	for i := range c.Nodes {
		c.stop(i)
	}
	for i := range c.Nodes {
		c.restart(i)
	}
	c.waitLeader()
	cl2 := newClient(t, c.addrs()...)
	dup, err := cl2.Append(ctx, last)
	if err != nil || !dup.Duplicate || dup.Lsn != lastResp.Lsn {
		t.Fatalf("producer retry after restart = %v, %v; want duplicate of lsn %d", dup, err, lastResp.Lsn)
	}
	offs, err := cl2.FetchOffsets(ctx, "g")
	if err != nil || len(offs) != 1 || offs[0].Offset != 199 {
		t.Fatalf("offsets after restart = %v, %v", offs, err)
	}
	for _, n := range c.Nodes {
		testwait.For(t, 60*time.Second, "restarted node head", func() bool { return uint64(n.HeadLSN()) >= top })
		sameTxns(t, want, readAll(t, n.APIAddr(), top))
	}

	// A new voter joins after compaction and gets everything.
	n3, cfg := startJoiner(t, "n3", func(cfg *logstore.Config) { cfg.SegmentBytes = 4 << 10 })
	c.Nodes, c.Configs = append(c.Nodes, n3), append(c.Configs, cfg)
	if err := cl2.AddVoter(ctx, "n3", cfg.RaftAddr, cfg.APIAddr); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "new voter catches up", func() bool { return uint64(n3.HeadLSN()) >= top })
	sameTxns(t, want, readAll(t, n3.APIAddr(), top))
	if got := snapshotDirs(t, cfg.Dir); len(got) == 0 {
		t.Fatal("the new voter received no snapshot (was the Raft log compacted?)")
	}
	// Its producer table and offsets came with the snapshot: make it lead.
	if err := cl2.TransferLeadership(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "n3 leads", n3.IsLeader)
	cl3 := newClient(t, cfg.APIAddr)
	dup, err = cl3.Append(ctx, last)
	if err != nil || !dup.Duplicate || dup.Lsn != lastResp.Lsn {
		t.Fatalf("producer retry on the new voter = %v, %v", dup, err)
	}
	if offs, err := cl3.FetchOffsets(ctx, "g"); err != nil || len(offs) != 1 || offs[0].Offset != 199 {
		t.Fatalf("offsets on the new voter = %v, %v", offs, err)
	}
}

// TestTornTailReapplied cuts the active segment in the middle of a record;
// the restarted node drops the torn tail and Raft re-applies it.
func TestTornTailReapplied(t *testing.T) {
	for _, backend := range logstoretest.RaftLogStores {
		t.Run(string(backend), func(t *testing.T) { testTornTailReapplied(t, backend) })
	}
}

func testTornTailReapplied(t *testing.T, backend logstore.RaftLogStore) {
	c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.RaftLogStore = backend })
	cl := newClient(t, c.addrs()...)
	acks := appendLoad(t, cl, 4, 25, "torn")
	top := maxLSN(acks)
	want := readAll(t, c.Nodes[0].APIAddr(), top)
	c.stop(0)
	segDir := filepath.Join(c.Configs[0].Dir, "segments")
	entries, err := os.ReadDir(segDir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".seg") {
			segs = append(segs, e.Name())
		}
	}
	slices.Sort(segs)
	active := filepath.Join(segDir, segs[len(segs)-1])
	st, err := os.Stat(active)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(active, st.Size()*2/3+3); err != nil { // mid-record, far from the end
		t.Fatal(err)
	}
	c.restart(0)
	c.waitLeader()
	testwait.For(t, 60*time.Second, "re-applied", func() bool { return uint64(c.Nodes[0].HeadLSN()) >= top })
	got := readAll(t, c.Nodes[0].APIAddr(), top)
	sameTxns(t, want, got)
	checkLog(t, got, acks)
}
