package logstore_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	walsegment "github.com/hashicorp/raft-wal/segment"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

var (
	powerLossSeeds = flag.Int("powerloss.seeds", 0, "TestPowerLossNode: run seeds 1..N (default 20, 10 under -race)")
	powerLossSeed  = flag.Uint64("powerloss.seed", 0, "TestPowerLossNode: run only this seed")
)

// cutStream is a Raft stream layer whose Cut severs the node from the
// cluster at once: the listener and every connection closed, every later
// dial refused. A power cut is Cut, then the crash image of the node's
// filesystem: whatever the node made durable before Cut is in the image,
// and nothing it made durable afterwards was ever told to a peer.
type cutStream struct {
	net.Listener
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

var errPowerCut = errors.New("test: power cut")

func (s *cutStream) track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut {
		c.Close()
		return nil, errPowerCut
	}
	s.conns = append(s.conns, c)
	return c, nil
}

func (s *cutStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return s.track(c)
}

func (s *cutStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	return s.track(c)
}

func (s *cutStream) Cut() {
	s.mu.Lock()
	s.cut = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	s.Listener.Close()
	for _, c := range conns {
		c.Close()
	}
}

// syncBuffer is a log destination shared by a node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// memSegmentFiles is segmentFiles for a node on a MemFS.
func memSegmentFiles(t testing.TB, fsys vfs.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	segDir := filepath.Join(dir, "segments")
	names, err := fsys.ReadDir(segDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		b, err := vfs.ReadFile(fsys, filepath.Join(segDir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// TestPowerLossNode cuts the power of one node of a 3-node cluster under
// writes: its segment log and its Raft log (raft-wal, its metadata and
// term/vote) are on vfs.NewCrashableMem; at a time drawn from the seed its
// Raft transport is severed (cutStream), the filesystem a power loss could
// leave is drawn from the seed (CrashClone: what was fsynced plus a random
// prefix of the rest, the last write possibly torn), and the node restarts
// on it. It must open (truncate its segment log back to what its Raft
// state proves), re-apply, catch up, and end with segment files
// byte-identical to the others'; every acknowledged Append is in every
// node's log at its LSN.
//
// Snapshots (seed%3, powerLossMode): off for a third of the seeds (the
// restarted node re-applies its whole Raft log and the leader's); on for
// the others, taken every 8 entries with 4 trailing logs, and the cut
// comes after every victim has a complete snapshot on its MemFS, at a
// random time or (powerLossMidSnapshot, snapshotTrap) while a victim is
// writing its next one. The restarted node must open on its newest
// complete snapshot in the crash image (recovered at its Raft index; a
// half-written one, a *.tmp directory, ignored) and catch up from its Raft
// log and the leader's; over the seeds run, at least one restart must
// restore a snapshot. With snapshots on and one victim, the others (on
// raft-boltdb, which drops compacted entries) go on until the leader's log
// no longer reaches the victim's last entry: the restarted victim must
// install the leader's snapshot, and its power is cut again right after
// (the second image must open at its newest complete snapshot too); over
// the seeds run, at least one victim must install.
//
// The seed picks the node (the leader or a follower), the cut time and the
// crash image; goroutine scheduling is not seeded, so a replay reruns the
// same choices, not the same interleaving.
//
//	go test ./logstore -run TestPowerLossNode -powerloss.seeds=200
//	go test ./logstore -run TestPowerLossNode -powerloss.seed=7
func TestPowerLossNode(t *testing.T) {
	var seeds []uint64
	if *powerLossSeed != 0 {
		seeds = append(seeds, *powerLossSeed)
	} else {
		n := *powerLossSeeds
		if n == 0 {
			n = 20
			if raceEnabled {
				n = 10
			}
		}
		for s := 1; s <= n; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	var stats powerLossStats
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("replay: go test ./logstore -count=1 -run 'TestPowerLossNode' -powerloss.seed=%d", seed)
				}
			})
			testPowerLossNode(t, seed, &stats)
		})
	}
	t.Logf("%d seeds with snapshots: %d snapshots taken by the victims before the cut, %d restarts restored one from the crash image, "+
		"%d crash images held a half-written one, %d victims installed the leader's snapshot",
		stats.seeds, stats.taken, stats.restored, stats.halfWritten, stats.installed)
	if stats.seeds >= 3 && stats.restored == 0 && !t.Failed() {
		t.Errorf("%d seeds with snapshots, no restart restored a snapshot", stats.seeds)
	}
	if stats.seeds >= 3 && stats.installed == 0 && !t.Failed() {
		t.Errorf("%d seeds with snapshots, no victim installed the leader's snapshot", stats.seeds)
	}
}

// powerLossMode is what a seed of TestPowerLossNode does with snapshots.
type powerLossMode int

const (
	powerLossNoSnapshots powerLossMode = iota
	powerLossSnapshots                 // the cut at a random time after the first snapshot
	powerLossMidSnapshot               // the cut while a snapshot is being written
)

// powerLossStats adds up, over the seeds of a run, what the victims did
// with snapshots.
type powerLossStats struct {
	seeds       int // seeds with snapshots on
	taken       int // snapshots the victims completed before the cut
	restored    int // restarts that opened on a snapshot of the crash image
	installed   int // victims that installed the leader's snapshot (then lost power again)
	halfWritten int // crash images with a *.tmp snapshot directory
}

// snapshotSteps are the points of writing a local snapshot where a
// snapshotTrap can stop it: in the checkpoint (a file created or linked in
// data/), before state.bin, manifest.json or meta.json is created, or after
// the *.tmp directory's rename, before its parent's fsync.
var snapshotSteps = []string{"data", "state.bin", "manifest.json", "meta.json", "rename"}

// snapshotTrap is a node's filesystem that, once armed, stops the snapshot
// store at one step of writing a snapshot: it sends the step on hit and
// waits for release, so the test cuts the power while the snapshot is half
// written. Only the snapshot goroutine waits; the node goes on applying.
type snapshotTrap struct {
	*vfs.MemFS
	mu      sync.Mutex
	once    sync.Once
	step    string // armed when not ""
	hit     chan string
	release chan struct{}
}

func (f *snapshotTrap) arm(step string) {
	f.mu.Lock()
	f.step = step
	f.mu.Unlock()
}

// at stops the caller if path, a name the store is creating (step
// "rename": a directory it has just renamed), is the armed step.
func (f *snapshotTrap) at(op, path string) {
	dir := filepath.Dir(path)
	f.mu.Lock()
	var match bool
	switch f.step {
	case "":
	case "data": // <id>.tmp/data/<file>
		match = filepath.Base(dir) == "data" && strings.HasSuffix(filepath.Dir(dir), ".tmp") &&
			filepath.Base(filepath.Dir(filepath.Dir(dir))) == "snapshots"
	case "rename": // snapshots/<id>
		match = op == "rename" && filepath.Base(dir) == "snapshots"
	default: // <id>.tmp/<step>
		match = op == "create" && filepath.Base(path) == f.step && strings.HasSuffix(dir, ".tmp") &&
			filepath.Base(filepath.Dir(dir)) == "snapshots"
	}
	step := f.step
	if match {
		f.step = ""
	}
	f.mu.Unlock()
	if match {
		f.hit <- step
		<-f.release
	}
}

// open releases a trapped snapshot (once; at the latest when the test ends).
func (f *snapshotTrap) open() { f.once.Do(func() { close(f.release) }) }

func (f *snapshotTrap) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&os.O_CREATE != 0 {
		f.at("create", name)
	}
	return f.MemFS.OpenFile(name, flag, perm)
}

func (f *snapshotTrap) Link(oldname, newname string) error {
	f.at("create", newname)
	return f.MemFS.Link(oldname, newname)
}

func (f *snapshotTrap) Rename(oldpath, newpath string) error {
	if err := f.MemFS.Rename(oldpath, newpath); err != nil {
		return err
	}
	if strings.HasSuffix(oldpath, ".tmp") {
		f.at("rename", newpath)
	}
	return nil
}

// memSnapshot is the part of a snapshot's meta.json the test reads.
type memSnapshot struct {
	ID          string
	Index, Term uint64
}

// memSnapshots lists the snapshot directory of the node at dir on fsys:
// the complete snapshots (a readable meta.json), newest first as the
// store orders them, and the names of half-written ones (*.tmp).
func memSnapshots(t testing.TB, fsys vfs.FS, dir string) (complete []memSnapshot, partial []string) {
	t.Helper()
	snapDir := filepath.Join(dir, "snapshots")
	names, err := fsys.Subdirs(snapDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".tmp") {
			partial = append(partial, name)
			continue
		}
		b, err := vfs.ReadFile(fsys, filepath.Join(snapDir, name, "meta.json"))
		if err != nil {
			continue // a reap cut short: the store skips it too
		}
		var m memSnapshot
		if err := json.Unmarshal(b, &m); err != nil || m.ID != name {
			continue
		}
		complete = append(complete, m)
	}
	slices.SortFunc(complete, func(a, b memSnapshot) int {
		return -cmp.Or(cmp.Compare(a.Term, b.Term), cmp.Compare(a.Index, b.Index), cmp.Compare(a.ID, b.ID))
	})
	return complete, partial
}

// snapshotIndex is the Raft index of r's newest snapshot.
func snapshotIndex(t testing.TB, r *raft.Raft) uint64 {
	t.Helper()
	idx, err := strconv.ParseUint(r.Stats()["last_snapshot_index"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// recoveredIndex is the raft_index of the last "recovered" line in log.
func recoveredIndex(t testing.TB, log *syncBuffer) uint64 {
	t.Helper()
	l := log.lines("msg=recovered")
	if len(l) == 0 {
		t.Fatal("the restarted node logged no recovered line")
	}
	var idx uint64
	for _, f := range strings.Fields(l[len(l)-1]) {
		if v, ok := strings.CutPrefix(f, "raft_index="); ok {
			if _, err := fmt.Sscan(v, &idx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return idx
}

func testPowerLossNode(t *testing.T, seed uint64, stats *powerLossStats) {
	rng := rand.New(rand.NewPCG(seed, 15))
	mode := powerLossMode(seed % 3)
	const n = 3
	// One node, or two at once (the quorum: then an acknowledged entry
	// survives only if the Raft log of one of them kept it, so a missing
	// fsync in the Raft log store loses it).
	victims := rng.Perm(n)[:1+rng.IntN(2)]
	sort.Ints(victims)
	isVictim := func(i int) bool { return slices.Contains(victims, i) }
	cutAfter := time.Duration(rng.IntN(500)) * time.Millisecond
	// One victim, snapshots on: the others go on without it until the
	// leader's log no longer reaches back to the victim's last entry, so
	// that the restarted victim must install the leader's snapshot.
	installWanted := mode != powerLossNoSnapshots && len(victims) == 1

	var peers []logstore.Peer
	var raftLis, apiLis []net.Listener
	for i := range n {
		rl, al := logstoretest.Listen(t), logstoretest.Listen(t)
		raftLis, apiLis = append(raftLis, rl), append(apiLis, al)
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()})
	}
	base := t.TempDir()
	mems := make([]*vfs.MemFS, n)
	traps := make([]*snapshotTrap, n)
	logs := make([]*syncBuffer, n)
	cfgs := make([]logstore.Config, n)
	streams := make([]*cutStream, n)
	stores := make([]*serve.Store, n)
	defer func() {
		for _, st := range stores {
			if st != nil {
				st.Close()
			}
		}
	}()
	for i := range n {
		cfg := logstoretest.Config(peers[i].ID, filepath.Join(base, peers[i].ID))
		cfg.Bootstrap, cfg.RaftAddr, cfg.APIAddr = peers, peers[i].RaftAddr, peers[i].APIAddr
		cfg.SegmentBytes = 16 << 10 // several seals, the sealer behind when the power goes
		cfg.SnapshotThreshold, cfg.SnapshotInterval = 1<<62, time.Hour
		if mode != powerLossNoSnapshots {
			// Every few entries, the log compacted behind them.
			cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = 8, 50*time.Millisecond, 4
		}
		if installWanted && !isVictim(i) {
			// raft-wal still serves the compacted entries of its tail
			// segment, so the others keep their Raft log in raft-boltdb,
			// which drops them: the victim, restarting behind the
			// leader's log, gets the leader's snapshot (InstallSnapshot).
			cfg.RaftLogStore = logstore.RaftLogBoltDB
		}
		if isVictim(i) {
			mems[i], logs[i] = vfs.NewCrashableMem(), &syncBuffer{}
			traps[i] = &snapshotTrap{MemFS: mems[i], hit: make(chan string), release: make(chan struct{})}
			cfg.FS = traps[i]
			cfg.Logger = slog.New(slog.NewTextHandler(logs[i], nil))
		}
		streams[i] = &cutStream{Listener: raftLis[i]}
		cfg.RaftStream = streams[i]
		cfgs[i] = cfg
		st, err := serve.StartStore(cfg, apiLis[i], "", cfg.Logger)
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = st
	}
	defer func() { // before the stores close: a trapped snapshot holds up Raft's shutdown
		for _, tr := range traps {
			if tr != nil {
				tr.open()
			}
		}
	}()
	testwait.For(t, 60*time.Second, "a leader", func() bool {
		for _, st := range stores {
			if st.Node.IsLeader() {
				return true
			}
		}
		return false
	})
	var cut []string
	for _, v := range victims {
		cut = append(cut, fmt.Sprintf("n%d (leader: %v)", v, stores[v].Node.IsLeader()))
	}
	when := map[powerLossMode]string{
		powerLossNoSnapshots: "snapshots off", powerLossSnapshots: "after a snapshot", powerLossMidSnapshot: "while writing a snapshot",
	}[mode]
	t.Logf("seed %d: power cut of %s after 20 acks and %v (%s)", seed, strings.Join(cut, " and "), cutAfter, when)

	// Writers: every success is an ack that must survive; a failure is an
	// unknown outcome (the LSN may or may not hold it).
	var addrs []string
	for _, p := range peers {
		addrs = append(addrs, p.APIAddr)
	}
	cl := newClient(t, addrs...)
	var mu sync.Mutex
	var acks []ack
	var failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("p%d-w%d-%d", seed, w, i)
				req := txnReq(id, fmt.Sprintf("t%d", w%3), "all")
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				resp, err := cl.Append(ctx, req)
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				acks = append(acks, ack{id, req, resp})
				mu.Unlock()
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// Under -race on a loaded 2-core machine the first appends can wait out
	// elections and the cluster version; 20 acks is the bar, not a speed.
	testwait.For(t, 180*time.Second, "writes flowing", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 20
	})
	if mode != powerLossNoSnapshots {
		stats.seeds++
		for _, v := range victims {
			testwait.For(t, 120*time.Second, fmt.Sprintf("a complete snapshot on n%d", v), func() bool {
				complete, _ := memSnapshots(t, mems[v], cfgs[v].Dir)
				return len(complete) > 0
			})
		}
	}
	var trapped *snapshotTrap
	if mode == powerLossMidSnapshot {
		trapped = traps[victims[0]]
		step := snapshotSteps[int(seed/3)%len(snapshotSteps)] // each step within 15 seeds
		trapped.arm(step)
		select {
		case step := <-trapped.hit:
			t.Logf("n%d stopped writing a snapshot at %s", victims[0], step)
		case <-time.After(120 * time.Second):
			t.Fatalf("n%d reached no snapshot step %s in 120s", victims[0], step)
		}
	} else {
		time.Sleep(cutAfter)
	}
	headAtCut, raftAtCut := make([]uint64, n), make([]uint64, n)
	for _, v := range victims {
		headAtCut[v], raftAtCut[v] = uint64(stores[v].Node.HeadLSN()), stores[v].Node.Raft().LastIndex()
		streams[v].Cut()
	}
	crashed := make([]*vfs.MemFS, n)
	for _, v := range victims {
		crashed[v] = mems[v].CrashClone(rng)
	}
	if trapped != nil {
		trapped.open() // the dead node may finish its snapshot: the image has what it had
	}
	for _, v := range victims {
		stores[v].Close() // the dead node's last writes go to mems[v], not to the image
		stores[v] = nil
	}
	wantIndex := make([]uint64, n) // the Raft index each victim must recover at
	if mode != powerLossNoSnapshots {
		for _, v := range victims {
			stats.taken += len(logs[v].lines(`msg="snapshot complete up to"`))
			complete, partial := memSnapshots(t, crashed[v], cfgs[v].Dir)
			if len(complete) > 0 {
				wantIndex[v] = complete[0].Index
			}
			if len(partial) > 0 {
				stats.halfWritten++
			}
			t.Logf("n%d crash image: snapshots %v, half-written %v", v, complete, partial)
		}
	}

	if installWanted {
		v := victims[0]
		testwait.For(t, 120*time.Second, fmt.Sprintf("a leader whose log starts after n%d's last entry %d", v, raftAtCut[v]), func() bool {
			for i, st := range stores {
				if st != nil && i != v && st.Node.IsLeader() {
					return snapshotIndex(t, st.Node.Raft()) > raftAtCut[v]+8 // TrailingLogs 4, and a margin
				}
			}
			return false
		})
	}

	// Power back: the same addresses, the crashed filesystems.
	restarted := time.Now()
	restart := func(v int, image *vfs.MemFS) {
		cfg := cfgs[v]
		cfg.FS = image
		logs[v] = &syncBuffer{} // the restarted node's own lines
		cfg.Logger = slog.New(slog.NewTextHandler(logs[v], nil))
		testwait.For(t, 30*time.Second, "restart on the crashed filesystem", func() bool {
			rl, err := net.Listen("tcp", peers[v].RaftAddr)
			if err != nil {
				return false // the old listener's port may linger a moment
			}
			streams[v] = &cutStream{Listener: rl}
			cfg.RaftStream = streams[v]
			st, err := serve.StartStore(cfg, nil, "", cfg.Logger)
			if err != nil {
				rl.Close()
				if errors.Is(err, logstore.ErrConfig) || !strings.Contains(err.Error(), "listen") {
					t.Fatalf("restart n%d after the power loss: %v", v, err)
				}
				return false
			}
			stores[v] = st
			return true
		})
		if l := logs[v].lines("msg=recovered"); len(l) > 0 {
			last := l[len(l)-1]
			t.Logf("n%d (head %d at the cut) restarted: %s", v, headAtCut[v], last[strings.Index(last, "msg="):])
		}
		if got := recoveredIndex(t, logs[v]); got != wantIndex[v] {
			t.Fatalf("n%d recovered at raft index %d, its newest complete snapshot in the crash image is at %d", v, got, wantIndex[v])
		} else if got > 0 {
			stats.restored++
		}
	}
	for _, v := range victims {
		restart(v, crashed[v])
	}
	if installWanted {
		// The victim installs the leader's snapshot over its own log
		// (segment Install keeps the files it has identical), and the
		// power goes again right after: the image must open at the
		// installed snapshot and catch up like any other.
		v := victims[0]
		testwait.For(t, 120*time.Second, fmt.Sprintf("n%d installs the leader's snapshot", v), func() bool {
			return len(logs[v].lines(`msg="Installed remote snapshot"`)) > 0
		})
		stats.installed++
		headAtCut[v] = uint64(stores[v].Node.HeadLSN())
		streams[v].Cut()
		image := crashed[v].CrashClone(rng)
		stores[v].Close()
		stores[v] = nil
		complete, partial := memSnapshots(t, image, cfgs[v].Dir)
		if len(complete) == 0 {
			t.Fatalf("n%d installed a snapshot, and the crash image right after holds none (half-written %v)", v, partial)
		}
		wantIndex[v] = complete[0].Index
		t.Logf("n%d cut again after the install: crash image snapshots %v, half-written %v", v, complete, partial)
		crashed[v] = image
		restart(v, image)
	}

	// Writes go on a little, then stop; every node reaches the same head.
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	var top uint64
	testwait.For(t, 60*time.Second, "a leader after the load", func() bool {
		for _, st := range stores {
			if st.Node.IsLeader() {
				return true
			}
		}
		return false
	})
	for _, st := range stores {
		top = max(top, uint64(st.Node.HeadLSN()))
	}
	top = max(top, maxLSN(acks))
	for i, st := range stores {
		testwait.For(t, 60*time.Second, fmt.Sprintf("n%d reaches lsn %d", i, top), func() bool { return uint64(st.Node.HeadLSN()) >= top })
	}
	for _, st := range stores {
		top = max(top, uint64(st.Node.HeadLSN()))
	}
	// An Append whose caller gave up (an unknown outcome) may still be in a
	// node's intake or Raft pipeline and commit after the writers stopped:
	// the head is the one every node reports, unchanged for settleFor.
	top = settledHead(t, stores, top)
	t.Logf("%d acknowledged, %d failed (unknown outcome), head %d; all nodes there %v after the restart", len(acks), failed.Load(), top, time.Since(restarted).Round(time.Millisecond))

	var want []*logstorepb.Transaction
	for i, st := range stores {
		txns := readAll(t, st.Node.APIAddr(), top)
		if len(txns) != int(top) {
			t.Fatalf("n%d: %d txns, want %d", i, len(txns), top)
		}
		checkLog(t, txns, acks)
		if want == nil {
			want = txns
		} else {
			sameTxns(t, want, txns)
		}
	}

	// Byte-identical segment files, taken while every node is at one head.
	// A leader elected after the settle commits what an earlier term left
	// uncommitted in its log (appends whose callers saw an unknown outcome),
	// so a head that moves while the files are read is settled again.
	var files []map[string][]byte
	for attempt := 1; ; attempt++ {
		files = files[:0]
		moved := false
		for i, st := range stores {
			if err := st.Node.SegmentLog().Sync(); err != nil {
				t.Fatal(err)
			}
			if isVictim(i) {
				files = append(files, memSegmentFiles(t, crashed[i], cfgs[i].Dir))
			} else {
				files = append(files, segmentFiles(t, cfgs[i].Dir))
			}
		}
		for _, st := range stores {
			moved = moved || uint64(st.Node.HeadLSN()) != top
		}
		if !moved {
			break
		}
		if attempt == 5 {
			t.Fatalf("the head kept moving after the load stopped (last settled at %d)", top)
		}
		top = settledHead(t, stores, top)
		t.Logf("the head moved after it settled (a late commit); settled again at %d", top)
	}
	ref := 0
	var names []string
	for name := range files[ref] {
		names = append(names, name)
	}
	sort.Strings(names)
	for i := range files {
		if len(files[i]) != len(files[ref]) {
			t.Fatalf("n%d has %d segment files %v, n%d %d %v", i, len(files[i]), keys(files[i]), ref, len(files[ref]), names)
		}
		for _, name := range names {
			if !bytes.Equal(files[i][name], files[ref][name]) {
				a, b := files[ref][name], files[i][name]
				at := 0
				for at < min(len(a), len(b)) && a[at] == b[at] {
					at++
				}
				var heads []string
				for j, st := range stores {
					heads = append(heads, fmt.Sprintf("n%d=%d", j, st.Node.HeadLSN()))
				}
				t.Fatalf("segment file %s differs between n%d and n%d (%d vs %d bytes, first at byte %d; heads now %s, settled at %d)",
					name, ref, i, len(a), len(b), at, strings.Join(heads, " "), top)
			}
		}
	}
}

// settledHead waits until every node reports the same head, at least
// atLeast, unchanged for settleFor, and returns it.
func settledHead(t *testing.T, stores []*serve.Store, atLeast uint64) uint64 {
	t.Helper()
	const settleFor = 3 * time.Second
	var head uint64
	var since time.Time
	testwait.For(t, 120*time.Second, fmt.Sprintf("every node at one head >= %d, unchanged for %v", atLeast, settleFor), func() bool {
		h := uint64(stores[0].Node.HeadLSN())
		for _, st := range stores[1:] {
			if uint64(st.Node.HeadLSN()) != h {
				since = time.Time{}
				return false
			}
		}
		if h < atLeast {
			return false
		}
		if h != head || since.IsZero() {
			head, since = h, time.Now()
			return false
		}
		return time.Since(since) >= settleFor
	})
	return head
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestNodeRefusesSealedTail: a data directory whose raft-wal log is in the
// state raft-wal v0.4.2 cannot append after (the tail segment sealed in its
// file, unsealed in the metadata: a crash between the seal and the
// rotation's metadata commit, logstore/walvfs.go) is refused at NewNode
// with errSealedTail and the recovery procedure, instead of a node that
// starts and then fails every Raft append. The state is made by rolling
// the metadata of a log that rotated back to before its last rotation.
func TestNodeRefusesSealedTail(t *testing.T) {
	mem := vfs.NewCrashableMem()
	dir := t.TempDir()
	walPath := filepath.Join(dir, "raft-wal")
	if err := mem.MkdirAll(walPath, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := raftwal.Open(walPath, raftwal.WithSegmentFiler(walsegment.NewFiler(walPath, logstore.WALVFSForTest(mem))),
		raftwal.WithMetaStore(logstore.NewWALMetaStoreForTest(mem)), raftwal.WithSegmentSize(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 300; i++ { // a StoreLogs after a seal waits for its rotation
		if err := w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: bytes.Repeat([]byte{'x'}, 100)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := logstore.CheckWALTailForTest(walPath, mem); err != nil {
		t.Fatalf("checkWALTail on a healthy log: %v", err)
	}
	meta := logstore.NewWALMetaStoreForTest(mem)
	st, err := meta.Load(walPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Segments) < 2 {
		t.Fatalf("%d segments, want a rotation", len(st.Segments))
	}
	st.Segments = st.Segments[:len(st.Segments)-1]
	tail := &st.Segments[len(st.Segments)-1]
	tail.SealTime, tail.MaxIndex, tail.IndexStart = time.Time{}, 0, 0
	if err := meta.CommitState(st); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig("n0", dir)
	cfg.FS = mem
	cfg.RaftListener = listen(t)
	cfg.APIAddr = logstoretest.FreeAddr(t)
	cfg.Bootstrap = []logstore.Peer{{ID: "n0", RaftAddr: cfg.RaftListener.Addr().String(), APIAddr: cfg.APIAddr}}
	n, err := logstore.NewNode(cfg)
	if err == nil {
		n.Close()
		t.Fatal("NewNode started on a raft-wal log wedged on a sealed tail")
	}
	if !errors.Is(err, logstore.ErrSealedTailForTest) || !strings.Contains(err.Error(), "cluster remove") {
		t.Fatalf("NewNode: %v, want errSealedTail with the recovery procedure", err)
	}
	t.Logf("NewNode: %v", err)
}

// TestNodeDirsDurable: the directories a node makes at its first start
// (its data directory, segments/, snapshots/, raft-wal/) are durable in
// their parents once NewNode returns: a power loss then keeps them (the
// durable image: nothing unsynced survives), so the files synced in them
// later are never lost with their directory.
func TestNodeDirsDurable(t *testing.T) {
	mem := vfs.NewCrashableMem()
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.FS, cfg.RaftLogStore = mem, logstore.RaftLogWAL
	})
	c.waitLeader()
	img := mem.DurableClone()
	for _, sub := range []string{"", "segments", "snapshots", "raft-wal"} {
		dir := filepath.Join(c.Configs[0].Dir, sub)
		if fi, err := img.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("%s after a power loss right after the start: %v", dir, err)
		}
	}
}
