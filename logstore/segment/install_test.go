package segment

import (
	"testing"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/types"
)

// TestInstallOverUnsyncedActive: a follower whose active segment holds
// exactly the records of one of the leader's sealed segments, never
// fsynced, installs the leader's checkpoint. Install keeps that file (same
// name, size and CRC) and links the leader's index beside it; a power loss
// right after Install returns must still leave a log that opens with every
// record of the checkpoint (the durable image: nothing that was not
// fsynced survives).
func TestInstallOverUnsyncedActive(t *testing.T) {
	fs := vfs.NewCrashableMem()
	lo := testOptions("/leader")
	lo.FS = fs
	leader := mustOpen(t, lo)
	g := newGen()
	want := appendN(t, leader, g, 400)
	segs := leader.Segments()
	if len(segs) < 4 {
		t.Fatalf("leader has %d segments, want at least 4", len(segs))
	}
	cp := "/cp"
	m, err := leader.Checkpoint(cp, 400)
	if err != nil {
		t.Fatal(err)
	}

	// The follower stops at the end of the leader's second sealed segment:
	// not sealed on its side yet (a segment is sealed when the next record
	// comes), and never synced.
	fo := testOptions("/follower")
	fo.FS = fs
	follower := mustOpen(t, fo)
	upTo := segs[1].LastLSN
	for _, txn := range want[:upTo] {
		if err := follower.Append(txn); err != nil {
			t.Fatal(err)
		}
	}
	if fsegs := follower.Segments(); fsegs[len(fsegs)-1].Name != segs[1].Name || fsegs[len(fsegs)-1].Sealed {
		t.Fatalf("follower's active segment is %+v, want the leader's sealed %s", fsegs[len(fsegs)-1], segs[1].Name)
	}
	if err := follower.Install(cp, m); err != nil {
		t.Fatal(err)
	}
	sameTxns(t, readAll(t, follower, 1, 0), want)

	crashed := fs.DurableClone()
	fo.FS = crashed
	r, err := Open(fo)
	if err != nil {
		t.Fatalf("Open after a power loss right after Install: %v", err)
	}
	defer r.Close()
	if r.LastLSN() != types.LSN(len(want)) {
		t.Fatalf("LastLSN %d after the power loss, want %d", r.LastLSN(), len(want))
	}
	sameTxns(t, readAll(t, r, 1, 0), want)
}
