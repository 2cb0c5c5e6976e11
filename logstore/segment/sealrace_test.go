package segment

import (
	"path/filepath"
	"testing"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// fullActiveLog returns a log on a crashable filesystem whose sealer runs
// only when the test (or a flush) asks, with records appended until the
// active segment is full: the next append seals it. It returns the records
// and the generator to continue with.
func fullActiveLog(t *testing.T) (*Log, *vfs.MemFS, Options, []*logstorepb.Transaction, *gen) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	o := testOptions("/log")
	o.FS = fs
	l := mustOpen(t, o)
	l.manualSeals()
	g := newGen()
	var txns []*logstorepb.Transaction
	for len(l.Segments()) < 3 || l.active().size < l.opts.SegmentBytes {
		txns = append(txns, appendN(t, l, g, 1)...)
	}
	return l, fs, o, txns, g
}

// TestSyncRacesSeal: a seal lands between Sync's wait for the sealer and
// its fsync of the active segment. Everything appended before Sync was
// called must be durable when it returns (the durable image opens with
// every record).
func TestSyncRacesSeal(t *testing.T) {
	l, fs, o, want, g := fullActiveLog(t)
	l.hooks.syncFlushed = func() {
		l.hooks.syncFlushed = nil
		appendN(t, l, g, 1) // seals the full active segment
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	o.FS = fs.DurableClone()
	r, err := Open(o)
	if err != nil {
		t.Fatalf("Open of the durable image: %v", err)
	}
	defer r.Close()
	if r.LastLSN() < types.LSN(len(want)) {
		t.Fatalf("the durable image holds up to lsn %d, Sync was called at %d", r.LastLSN(), len(want))
	}
	sameTxns(t, readAll(t, r, 1, types.LSN(len(want))), want)
}

// TestCheckpointRacesSeal: the segment holding the checkpoint's last
// record is sealed between Checkpoint's sync and its plan (appends go on
// during a checkpoint). The checkpoint must succeed, and its files (in the
// durable image: nothing unsynced survives) must verify and install.
func TestCheckpointRacesSeal(t *testing.T) {
	l, fs, o, want, g := fullActiveLog(t)
	upTo := types.LSN(len(want))
	l.hooks.beforeCheckpointPlan = func() {
		l.hooks.beforeCheckpointPlan = nil
		appendN(t, l, g, 1) // seals the segment ending at upTo
	}
	m, err := l.Checkpoint("/cp", upTo)
	if err != nil {
		t.Fatalf("Checkpoint while the segment ending at lsn %d is sealed: %v", upTo, err)
	}
	if m.LastLSN != upTo {
		t.Fatalf("checkpoint up to %d, want %d", m.LastLSN, upTo)
	}
	crashed := fs.DurableClone()
	for _, f := range m.Files {
		if err := verifyFile(crashed, filepath.Join("/cp", f.Name), f); err != nil {
			t.Fatalf("checkpoint file after a power loss: %v", err)
		}
	}
	o.FS, o.Dir = crashed, "/installed"
	r := mustOpen(t, o)
	if err := r.Install("/cp", m); err != nil {
		t.Fatal(err)
	}
	sameTxns(t, readAll(t, r, 1, 0), want)
}
