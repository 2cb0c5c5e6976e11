//go:build failpoints

package segment

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Disk faults (go test -tags failpoints). The contract: a log that cannot
// make its data durable says so (ErrNotDurable, sticky) on every later
// AppendBatch, Sync and Checkpoint, so the node stops (the FSM panics on an
// append error) and no snapshot claims what is not on disk; a failed write
// appends nothing; after the fault clears, a restart recovers.

// TestSealSyncFailureIsSticky: the background fsync of a sealed segment
// fails; the next append, Sync and Checkpoint refuse with ErrNotDurable,
// nothing more is appended, and a restart without the fault recovers every
// record appended before.
func TestSealSyncFailureIsSticky(t *testing.T) {
	o := testOptions(t.TempDir())
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	failpoint.Enable(failpoint.SegmentSync, failpoint.Action{Err: syscall.EIO})
	defer failpoint.Disable(failpoint.SegmentSync)
	g := newGen()
	want := appendN(t, l, g, 80) // seals at least once
	if l.Stats().Seals == 0 {
		t.Fatal("no seal")
	}
	err = l.Sync()
	if !errors.Is(err, ErrNotDurable) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v, want ErrNotDurable wrapping EIO", err)
	}
	last := l.LastLSN()
	if err := l.AppendBatch(txnsOf(g, 3)); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("AppendBatch after a failed seal: %v, want ErrNotDurable", err)
	}
	if l.LastLSN() != last {
		t.Fatalf("LastLSN moved from %d to %d after a refused append", last, l.LastLSN())
	}
	if _, err := l.Checkpoint(t.TempDir(), last); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("Checkpoint after a failed seal: %v, want ErrNotDurable", err)
	}
	failpoint.Disable(failpoint.SegmentSync)
	if err := l.Sync(); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("Sync after the fault cleared: %v, want the sticky ErrNotDurable", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, o)
	sameTxns(t, readAll(t, r, 1, 0), want)
	appendN(t, r, genAfter(len(want)), 10)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestActiveSyncFailureIsSticky: Sync's fsync of the active segment, or of
// the directory, fails; it stays failed.
func TestActiveSyncFailureIsSticky(t *testing.T) {
	for _, point := range []string{failpoint.SegmentSync, failpoint.SegmentSyncDir} {
		t.Run(point, func(t *testing.T) {
			l := mustOpen(t, testOptions(t.TempDir()))
			g := newGen()
			appendN(t, l, g, 5)
			failpoint.Enable(point, failpoint.Action{Err: syscall.EIO, Times: 1})
			if err := l.Sync(); !errors.Is(err, ErrNotDurable) {
				t.Fatalf("Sync: %v, want ErrNotDurable", err)
			}
			if failpoint.Hits(point) != 1 {
				t.Fatalf("the fault was hit %d times", failpoint.Hits(point))
			}
			if err := l.Sync(); !errors.Is(err, ErrNotDurable) {
				t.Fatalf("second Sync: %v, want the sticky ErrNotDurable", err)
			}
			if err := l.AppendBatch(txnsOf(g, 1)); !errors.Is(err, ErrNotDurable) {
				t.Fatalf("AppendBatch: %v, want ErrNotDurable", err)
			}
		})
	}
}

// TestWriteENOSPC: a write that fails (disk full) appends nothing and
// leaves nothing on disk; the same records append once space is back, and
// a restart finds exactly them.
func TestWriteENOSPC(t *testing.T) {
	o := testOptions(t.TempDir())
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen()
	want := appendN(t, l, g, 10)
	batch := txnsOf(g, 4)
	failpoint.Enable(failpoint.SegmentWrite, failpoint.Action{Err: syscall.ENOSPC, Times: 1})
	defer failpoint.Disable(failpoint.SegmentWrite)
	if err := l.AppendBatch(batch); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("AppendBatch on a full disk: %v, want ENOSPC", err)
	}
	if l.LastLSN() != types.LSN(len(want)) {
		t.Fatalf("LastLSN %d after a failed write, want %d", l.LastLSN(), len(want))
	}
	if _, err := l.Get(types.LSN(len(want) + 1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a record whose write failed: %v, want ErrNotFound", err)
	}
	if err := l.AppendBatch(batch); err != nil {
		t.Fatalf("AppendBatch once space is back: %v", err)
	}
	want = append(want, batch...)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := mustOpen(t, o)
	sameTxns(t, readAll(t, r, 1, 0), want)
}

// TestSlowSealSyncStaysOffTheApplyPath: a seal whose fsync takes long does
// not hold up the append that sealed; Sync (a snapshot) waits for it.
func TestSlowSealSyncStaysOffTheApplyPath(t *testing.T) {
	const delay = time.Second
	l := mustOpen(t, testOptions(t.TempDir()))
	failpoint.Enable(failpoint.SegmentSync, failpoint.Action{Delay: delay, Times: 1})
	defer failpoint.Disable(failpoint.SegmentSync)
	g := newGen()
	for l.Stats().Seals == 0 {
		appendN(t, l, g, 1)
	}
	// The sealer is inside its delayed fsync (or about to be): the append
	// that sealed has returned without waiting for it.
	testwait.For(t, 5*time.Second, "the sealer reaches the slow fsync", func() bool {
		return failpoint.Hits(failpoint.SegmentSync) == 1
	})
	if st := l.Stats(); st.SealSyncTime != 0 {
		t.Fatalf("the seal's fsync finished (%v) before the append returned", st.SealSyncTime)
	}
	appendN(t, l, g, 5) // appends go on meanwhile
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.SealSyncTime < delay {
		t.Fatalf("Sync returned before the slow seal was durable (seal sync time %v)", st.SealSyncTime)
	}
}

// txnsOf returns the next n transactions of g.
func txnsOf(g *gen, n int) []*logstorepb.Transaction {
	out := make([]*logstorepb.Transaction, n)
	for i := range out {
		out[i] = g.txn()
	}
	return out
}
