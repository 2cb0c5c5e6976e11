package segment

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

// checkManifest checks m against the log it came from: contiguous files that
// verify in dir, sealed files hard-linked to the log's, the last one a copy.
func checkManifest(t *testing.T, l *Log, dir string, m Manifest, upTo types.LSN) {
	t.Helper()
	if err := m.Verify(dir); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if m.FirstLSN != l.FirstLSN() || m.LastLSN != upTo {
		t.Fatalf("manifest covers %d..%d, want %d..%d", m.FirstLSN, m.LastLSN, l.FirstLSN(), upTo)
	}
	for i, f := range m.Files {
		linked := sameFile(t, filepath.Join(l.opts.Dir, f.Name), filepath.Join(dir, f.Name))
		if _, err := os.Stat(filepath.Join(l.opts.Dir, f.Name)); err != nil {
			t.Fatal(err)
		}
		if last := i == len(m.Files)-1; linked == last {
			t.Fatalf("file %s (last %v) hard-linked: %v", f.Name, last, linked)
		}
	}
}

func TestCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		upTo func(segs []SegmentInfo) types.LSN
	}{
		{"inside the active segment", func(segs []SegmentInfo) types.LSN { return segs[len(segs)-1].FirstLSN + 2 }},
		{"whole log", func(segs []SegmentInfo) types.LSN { return segs[len(segs)-1].LastLSN }},
		{"inside a sealed segment", func(segs []SegmentInfo) types.LSN { return segs[3].FirstLSN + 5 }},
		{"at the end of a sealed segment", func(segs []SegmentInfo) types.LSN { return segs[3].LastLSN }},
		{"nothing", func([]SegmentInfo) types.LSN { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t.TempDir())
			l := mustOpen(t, o)
			g := newGen()
			want := appendN(t, l, g, 400)
			upTo := tc.upTo(l.Segments())
			cp := filepath.Join(t.TempDir(), "cp")
			m, err := l.Checkpoint(cp, upTo)
			if err != nil {
				t.Fatal(err)
			}
			checkManifest(t, l, cp, m, upTo)
			if upTo > 0 && m.LastRaftIndex != want[upTo-1].RaftIndex {
				t.Fatalf("manifest last raft index %d, want %d", m.LastRaftIndex, want[upTo-1].RaftIndex)
			}
			// The log goes on; the checkpoint does not change.
			want = append(want, appendN(t, l, g, 100)...)
			if err := m.Verify(cp); err != nil {
				t.Fatalf("checkpoint changed by later appends: %v", err)
			}
			// The checkpoint directory opens as a log holding exactly
			// [1, upTo], and appending to it leaves the original alone.
			o2 := testOptions(cp)
			c := mustOpen(t, o2)
			if c.LastLSN() != upTo {
				t.Fatalf("checkpoint log ends at %d, want %d", c.LastLSN(), upTo)
			}
			sameTxns(t, readAll(t, c, 1, 0), want[:upTo])
			appendN(t, c, genAfter(int(upTo)), 200)
			sameTxns(t, readAll(t, l, 1, 0), want)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			for _, f := range m.Files[:len(m.Files)-1] {
				if err := verifyFile(vfs.Default, filepath.Join(o.Dir, f.Name), f); err != nil {
					t.Fatalf("original changed by the checkpoint's log: %v", err)
				}
			}
		})
	}
}

func TestCheckpointErrors(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	appendN(t, l, newGen(), 400)
	if _, err := l.Checkpoint(t.TempDir(), 401); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Checkpoint above LastLSN: %v", err)
	}
	if _, err := l.DeleteBefore(200); err != nil {
		t.Fatal(err)
	}
	first := l.FirstLSN()
	if _, err := l.Checkpoint(t.TempDir(), first-2); !errors.Is(err, ErrBelowRetention) {
		t.Fatalf("Checkpoint below retention: %v", err)
	}
	cp := t.TempDir()
	m, err := l.Checkpoint(cp, first-1)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 1 || m.Files[0].Bytes != 0 || m.FirstLSN != first || m.LastLSN != first-1 {
		t.Fatalf("empty checkpoint at %d: %+v", first, m)
	}
	if _, err := l.Checkpoint(cp, 300); err == nil {
		t.Fatalf("Checkpoint into a directory holding segment files succeeded")
	}
}

func TestInstallIntoFreshLog(t *testing.T) {
	src := mustOpen(t, testOptions(t.TempDir()))
	want := appendN(t, src, newGen(), 400)
	if _, err := src.DeleteBefore(100); err != nil {
		t.Fatal(err)
	}
	first := src.FirstLSN()
	cp := t.TempDir()
	m, err := src.Checkpoint(cp, 380)
	if err != nil {
		t.Fatal(err)
	}
	// Ship the files through a stream, as a snapshot does.
	var stream bytes.Buffer
	n, err := m.WriteFiles(vfs.Default, &stream, cp)
	if err != nil || n != m.Bytes() {
		t.Fatalf("WriteFiles: %d bytes, %v; manifest has %d", n, err, m.Bytes())
	}
	recv := filepath.Join(t.TempDir(), "recv")
	if err := m.ReadFiles(vfs.Default, bytes.NewReader(stream.Bytes()), recv); err != nil {
		t.Fatal(err)
	}

	o := testOptions(t.TempDir())
	l := mustOpen(t, o)
	if err := l.Install(recv, m); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if l.FirstLSN() != first || l.LastLSN() != 380 || l.LastRaftIndex() != want[379].RaftIndex {
			t.Fatalf("installed log: first %d last %d raft %d; want %d 380 %d", l.FirstLSN(), l.LastLSN(), l.LastRaftIndex(), first, want[379].RaftIndex)
		}
		sameTxns(t, readAll(t, l, first, 0), want[first-1:380])
		lsn, err := l.TopicOffsetLSN("orders", types.Offset(want[first-1].Slices[0].FirstOffset))
		if err != nil || lsn != first {
			t.Fatalf("TopicOffsetLSN after install: %d, %v", lsn, err)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, o)
	check(l)
	// Raft applies the rest; the log continues with the same files as the
	// leader's.
	appendN(t, l, genAfter(380), 20)
	srcSegs, gotSegs := src.Segments(), l.Segments()
	if len(srcSegs) != len(gotSegs) {
		t.Fatalf("segments differ:\n%+v\n%+v", srcSegs, gotSegs)
	}
	for i := range srcSegs {
		if srcSegs[i] != gotSegs[i] {
			t.Fatalf("segment %d differs: %+v, leader %+v", i, gotSegs[i], srcSegs[i])
		}
		a, _ := os.ReadFile(filepath.Join(src.opts.Dir, srcSegs[i].Name))
		b, _ := os.ReadFile(filepath.Join(o.Dir, gotSegs[i].Name))
		if !bytes.Equal(a, b) {
			t.Fatalf("segment %s not byte-identical to the leader's", gotSegs[i].Name)
		}
	}
}

func TestInstallKeepsIdenticalFiles(t *testing.T) {
	g := newGen()
	leader := mustOpen(t, testOptions(t.TempDir()))
	want := appendN(t, leader, g, 400)

	// A follower that has the first 150 records: same sealed segments
	// up to there.
	o := testOptions(t.TempDir())
	l := mustOpen(t, o)
	appendN(t, l, newGen(), 150)
	before := l.Segments()
	kept := filepath.Join(t.TempDir(), "kept")
	if err := os.Link(filepath.Join(o.Dir, before[0].Name), kept); err != nil {
		t.Fatal(err)
	}
	oldActive := filepath.Join(t.TempDir(), "active")
	if err := os.Link(filepath.Join(o.Dir, before[len(before)-1].Name), oldActive); err != nil {
		t.Fatal(err)
	}

	cp := t.TempDir()
	m, err := leader.Checkpoint(cp, 400)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Install(cp, m); err != nil {
		t.Fatal(err)
	}
	sameTxns(t, readAll(t, l, 1, 0), want)
	if !sameFile(t, kept, filepath.Join(o.Dir, before[0].Name)) {
		t.Fatalf("Install replaced the identical file %s", before[0].Name)
	}
	if sameFile(t, oldActive, filepath.Join(o.Dir, before[len(before)-1].Name)) {
		t.Fatalf("Install kept the follower's partial active segment %s", before[len(before)-1].Name)
	}
}

func TestInstallRejectsBadFiles(t *testing.T) {
	leader := mustOpen(t, testOptions(t.TempDir()))
	appendN(t, leader, newGen(), 400)
	cp := t.TempDir()
	m, err := leader.Checkpoint(cp, 400)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t.TempDir())
	l := mustOpen(t, o)
	want := appendN(t, l, newGen(), 10)

	flip(t, filepath.Join(cp, m.Files[2].Name), 100)
	if err := l.Install(cp, m); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Install of a damaged file: %v, want ErrCorrupt", err)
	}
	bad := m
	bad.Files = append([]FileInfo(nil), m.Files...)
	bad.Files[0].Name = "../../etc/passwd"
	if err := l.Install(cp, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Install of a manifest with a bad name: %v, want ErrCorrupt", err)
	}
	bad.Files = m.Files[1:]
	if err := l.Install(cp, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Install of a manifest with a gap: %v, want ErrCorrupt", err)
	}
	// Nothing changed.
	sameTxns(t, readAll(t, l, 1, 0), want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	sameTxns(t, readAll(t, mustOpen(t, o), 1, 0), want)

	var stream bytes.Buffer
	flip(t, filepath.Join(cp, m.Files[2].Name), 100) // undo
	if _, err := m.WriteFiles(vfs.Default, &stream, cp); err != nil {
		t.Fatal(err)
	}
	b := stream.Bytes()
	b[len(b)/2] ^= 1
	if err := m.ReadFiles(vfs.Default, bytes.NewReader(b), t.TempDir()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadFiles of a damaged stream: %v, want ErrCorrupt", err)
	}
	if err := m.ReadFiles(vfs.Default, bytes.NewReader(b[:len(b)/3]), t.TempDir()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadFiles of a short stream: %v, want ErrCorrupt", err)
	}
}

// TestUnfinishedInstall: a crash during Install leaves its marker; Open
// discards the half-installed files and starts empty.
func TestUnfinishedInstall(t *testing.T) {
	o := testOptions(t.TempDir())
	sealedLog(t, o, 200)
	if err := os.WriteFile(filepath.Join(o.Dir, installMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, o)
	if l.FirstLSN() != 1 || l.LastLSN() != 0 || len(l.Segments()) != 1 {
		t.Fatalf("after an unfinished install: first %d last %d segments %d", l.FirstLSN(), l.LastLSN(), len(l.Segments()))
	}
	if _, err := os.Stat(filepath.Join(o.Dir, installMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker still there: %v", err)
	}
}

// TestLinkedFilesNeverChange: neither truncating into a sealed segment nor
// reopening a log whose active file has another name writes a file a
// checkpoint links to.
func TestLinkedFilesNeverChange(t *testing.T) {
	o := testOptions(t.TempDir())
	l := mustOpen(t, o)
	g := newGen()
	g.perEntry = 1
	want := appendN(t, l, g, 400)
	segs := l.Segments()
	cp := t.TempDir()
	m, err := l.Checkpoint(cp, 400)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TruncateAfterRaftIndex(want[segs[2].FirstLSN+3].RaftIndex); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, genAfterPer(int(segs[2].FirstLSN+4), 1), 50)
	if err := m.Verify(cp); err != nil {
		t.Fatalf("truncating and appending changed a checkpoint's file: %v", err)
	}

	// A second name on the active file: Open gives the log its own copy.
	active := l.Segments()[len(l.Segments())-1]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := os.Link(filepath.Join(o.Dir, active.Name), other); err != nil {
		t.Fatal(err)
	}
	size := fileSize(t, other)
	l = mustOpen(t, o)
	appendN(t, l, genAfterPer(int(l.LastLSN()), 1), 5)
	if got := fileSize(t, other); got != size {
		t.Fatalf("appending changed a file linked elsewhere: %d bytes, was %d", got, size)
	}
	var n int
	if err := l.Read(1, 0, func(*logstorepb.Transaction) (bool, error) { n++; return true, nil }); err != nil || types.LSN(n) != l.LastLSN() {
		t.Fatalf("read %d records, %v; last %d", n, err, l.LastLSN())
	}
}
