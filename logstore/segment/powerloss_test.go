package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// powerLossSeeds is the table of seeds TestPowerLoss runs; a failure names
// its seed (go test -run 'TestPowerLoss/seed=N$' replays it exactly: the
// test drives the sealer itself, so nothing depends on scheduling).
var powerLossSeeds = func() []uint64 {
	s := make([]uint64, 128)
	for i := range s {
		s[i] = uint64(i) + 1
	}
	return s
}()

// TestPowerLoss runs the segment log on a crashable in-memory filesystem
// and cuts the power at a point chosen by the seed: after a checkpoint (a
// snapshot: everything up to it fsynced), maybe retention below it, more
// appends with the sealer some seals behind (sealed segments not fsynced, no index file), then a crash
// that keeps only what was fsynced plus a random prefix of the rest (file
// data and directory entries alike). The node then recovers as the LogStore
// does: Open, TruncateAfterRaftIndex(the snapshot's Raft index), Raft
// applies the same records again. It must hold every record up to the
// snapshot, the checkpoint must still verify, and the log must end
// byte-identical to one that never crashed.
func TestPowerLoss(t *testing.T) {
	const total = 450
	want := make([]*logstorepb.Transaction, 0, total)
	g := newGen()
	for range total {
		want = append(want, g.txn())
	}
	ref := vfs.NewCrashableMem()
	{
		o := testOptions("/ref")
		o.FS = ref
		l := mustOpen(t, o)
		appendBatches(t, l, want, rand.New(rand.NewPCG(0, 0)), nil)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	refFiles := memFiles(t, ref, "/ref")
	for _, seed := range powerLossSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("replay: go test ./logstore/segment -run 'TestPowerLoss/seed=%d$'", seed)
				}
			}()
			powerLoss(t, seed, want, refFiles)
		})
	}
}

func powerLoss(t *testing.T, seed uint64, want []*logstorepb.Transaction, refFiles map[string][]byte) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	perEntry := int(newGen().perEntry)
	crashAt := 1 + rng.IntN(len(want))
	// The snapshot ends a Raft entry (a snapshot is taken between applies).
	snapAt := rng.IntN(crashAt+1) / perEntry * perEntry
	fs := vfs.NewCrashableMem()
	o := testOptions("/log")
	o.FS = fs
	l := mustOpen(t, o)
	l.manualSeals()
	appendBatches(t, l, want[:snapAt], rng, l)
	var m Manifest
	if snapAt > 0 {
		var err error
		if m, err = l.Checkpoint("/snap", types.LSN(snapAt)); err != nil {
			t.Fatal(err)
		}
	}
	// Retention may remove segments below the snapshot meanwhile.
	var retained types.LSN = 1
	if snapAt > 0 && rng.IntN(2) == 0 {
		if _, err := l.DeleteBefore(types.LSN(1 + rng.IntN(snapAt))); err != nil {
			t.Fatal(err)
		}
		retained = l.FirstLSN()
	}
	appendBatches(t, l, want[snapAt:crashAt], rng, l)
	crashed := fs.CrashClone(rng)
	t.Logf("seed %d: %d records appended, snapshot at %d, %d seals pending at the crash", seed, crashAt, snapAt, len(l.sealer.mu.queue))

	for _, f := range m.Files {
		if err := verifyFile(crashed, filepath.Join("/snap", f.Name), f); err != nil {
			t.Fatalf("the checkpoint did not survive the power loss: %v", err)
		}
	}
	o.FS = crashed
	r, err := Open(o)
	if err != nil {
		t.Fatalf("Open after power loss: %v", err)
	}
	defer r.Close()
	if r.LastLSN() < types.LSN(snapAt) {
		t.Fatalf("LastLSN %d after power loss, below the snapshot's %d", r.LastLSN(), snapAt)
	}
	snapRaft := uint64(0)
	if snapAt > 0 {
		snapRaft = want[snapAt-1].RaftIndex
	}
	if _, err := r.TruncateAfterRaftIndex(snapRaft); err != nil {
		t.Fatal(err)
	}
	if r.LastLSN() != types.LSN(snapAt) {
		t.Fatalf("LastLSN %d after truncating to raft index %d, want %d", r.LastLSN(), snapRaft, snapAt)
	}
	// The removals of retention were not all made durable: the log may
	// start below where it did, never above.
	first := r.FirstLSN()
	if first > retained {
		t.Fatalf("FirstLSN %d after power loss, above the %d retained before it", first, retained)
	}
	if snapAt > 0 {
		sameTxns(t, readAll(t, r, first, 0), want[first-1:snapAt])
	}
	appendBatches(t, r, want[snapAt:], rng, nil)
	sameTxns(t, readAll(t, r, first, 0), want[first-1:])
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	got := memFiles(t, crashed, "/log")
	var wantNames []string
	for name := range refFiles {
		if base, _, _ := parseFileName(name); base >= first {
			wantNames = append(wantNames, name)
		}
	}
	slices.Sort(wantNames)
	if !slices.Equal(keys(got), wantNames) {
		t.Fatalf("files after recovery %v, want %v", keys(got), wantNames)
	}
	for _, name := range wantNames {
		if !bytes.Equal(got[name], refFiles[name]) {
			t.Fatalf("%s differs from the log that never crashed (%d bytes, want %d)", name, len(got[name]), len(refFiles[name]))
		}
	}
}

// appendBatches appends txns in batches of random sizes (as Raft entries
// arrive); with manual set, it lets the sealer run one seal after a
// quarter of the batches, so it falls behind at random.
func appendBatches(t *testing.T, l *Log, txns []*logstorepb.Transaction, rng *rand.Rand, manual *Log) {
	t.Helper()
	for len(txns) > 0 {
		n := min(1+rng.IntN(20), len(txns))
		if err := l.AppendBatch(txns[:n]); err != nil {
			t.Fatal(err)
		}
		txns = txns[n:]
		if manual != nil {
			if rng.IntN(4) == 0 {
				manual.runSeals(1)
			}
		}
	}
}

// memFiles returns the segment and index files of dir in fs.
func memFiles(t *testing.T, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, name := range names {
		if _, _, ok := parseFileName(name); !ok {
			continue
		}
		b, err := vfs.ReadFile(fs, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
