package segment

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// activeFile returns the path of l's active segment and the positions of its
// records.
func activeFile(l *Log) (string, []int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.active()
	return s.segPath(), append([]int64(nil), s.pos...)
}

// genAfter returns a generator that continues after the first n transactions
// newGen makes.
func genAfter(n int) *gen { return genAfterPer(n, newGen().perEntry) }

// genAfterPer is genAfter for a generator with perEntry transactions per
// Raft entry.
func genAfterPer(n int, perEntry uint64) *gen {
	g := newGen()
	g.perEntry = perEntry
	for range n {
		g.txn()
	}
	return g
}

func TestTornTail(t *testing.T) {
	const n = 40
	cases := []struct {
		name string
		// damage changes the file of an active segment whose records start
		// at pos (the last at pos[len-1]) and returns how many records
		// survive.
		damage func(t *testing.T, path string, pos []int64, size int64) int
	}{
		{"cut at a record boundary", func(t *testing.T, path string, pos []int64, _ int64) int {
			truncate(t, path, pos[len(pos)-1])
			return n - 1
		}},
		{"cut inside the last header", func(t *testing.T, path string, pos []int64, _ int64) int {
			truncate(t, path, pos[len(pos)-1]+3)
			return n - 1
		}},
		{"cut inside the last payload", func(t *testing.T, path string, pos []int64, _ int64) int {
			truncate(t, path, pos[len(pos)-1]+headerBytes+10)
			return n - 1
		}},
		{"cut one byte short", func(t *testing.T, path string, _ []int64, size int64) int {
			truncate(t, path, size-1)
			return n - 1
		}},
		{"cut inside an earlier record", func(t *testing.T, path string, pos []int64, _ int64) int {
			truncate(t, path, pos[len(pos)-5]+30)
			return n - 5
		}},
		{"garbage appended", func(t *testing.T, path string, _ []int64, _ int64) int {
			appendBytes(t, path, []byte("\x10\x00\x00\x00garbage that is not a record at all"))
			return n
		}},
		{"zeros appended", func(t *testing.T, path string, _ []int64, _ int64) int {
			appendBytes(t, path, make([]byte, 4096))
			return n
		}},
		{"flipped byte in the last payload", func(t *testing.T, path string, pos []int64, _ int64) int {
			flip(t, path, pos[len(pos)-1]+headerBytes+5)
			return n - 1
		}},
		{"flipped byte in the last crc", func(t *testing.T, path string, pos []int64, _ int64) int {
			flip(t, path, pos[len(pos)-1]+5)
			return n - 1
		}},
		{"last length made huge", func(t *testing.T, path string, pos []int64, _ int64) int {
			writeAt(t, path, pos[len(pos)-1]+3, []byte{0x7f})
			return n - 1
		}},
		{"flipped byte in an earlier record", func(t *testing.T, path string, pos []int64, _ int64) int {
			flip(t, path, pos[len(pos)-10]+headerBytes+1)
			return n - 10
		}},
		{"whole file zeroed", func(t *testing.T, path string, _ []int64, size int64) int {
			writeAt(t, path, 0, make([]byte, size))
			return 0
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir)
			o.SegmentBytes = 1 << 20 // one segment
			l := mustOpen(t, o)
			want := appendN(t, l, newGen(), n)
			path, pos := activeFile(l)
			size := l.SizeBytes()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			keep := tc.damage(t, path, pos, size)
			damagedSize := fileSize(t, path)

			var logs bytes.Buffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			l = mustOpen(t, o)
			if got := l.LastLSN(); got != types.LSN(keep) {
				t.Fatalf("after damage LastLSN = %d, want %d", got, keep)
			}
			sameTxns(t, readAll(t, l, 1, 0), want[:keep])
			goodEnd := size
			if keep < n {
				goodEnd = pos[keep]
			}
			dropped := damagedSize - goodEnd
			logged := strings.Contains(logs.String(), "truncating torn or corrupt tail")
			if logged != (dropped > 0) || (logged && !strings.Contains(logs.String(), fmt.Sprintf("bytes=%d ", dropped))) {
				t.Fatalf("recovery dropped %d bytes and logged %q", dropped, logs.String())
			}
			if st := l.Stats(); st.TruncatedBytes != dropped {
				t.Fatalf("Stats().TruncatedBytes = %d, dropped %d", st.TruncatedBytes, dropped)
			}
			if got := fileSize(t, path); got != goodEnd {
				t.Fatalf("active segment has %d bytes after recovery, want %d", got, goodEnd)
			}
			// Appending continues at the right LSN, and a second reopen
			// finds everything.
			more := appendN(t, l, genAfter(keep), 5)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, o)
			sameTxns(t, readAll(t, l, 1, 0), append(want[:keep:keep], more...))
		})
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	writeAt(t, path, fileSize(t, path), b)
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, path, off, []byte{b[off] ^ 0x01})
}

// sealedLog writes n records into small segments and closes the log,
// returning the transactions and the segments.
func sealedLog(t *testing.T, o Options, n int) ([]*logstorepb.Transaction, []SegmentInfo) {
	t.Helper()
	l := mustOpen(t, o)
	want := appendN(t, l, newGen(), n)
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("only %d segments", len(segs))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return want, segs
}

// TestOpenDoesNotReadSealedData proves the restart cost: every byte of the
// sealed segments is overwritten (sizes kept), and Open still succeeds with
// the right LSNs, because it reads only their index files and scans only the
// active segment. Reading a damaged record then reports ErrCorrupt.
func TestOpenDoesNotReadSealedData(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	want, segs := sealedLog(t, o, 400)
	for _, s := range segs[:len(segs)-1] {
		path := filepath.Join(dir, s.Name)
		writeAt(t, path, 0, bytes.Repeat([]byte{0xA5}, int(fileSize(t, path))))
	}
	l := mustOpen(t, o)
	if l.FirstLSN() != 1 || l.LastLSN() != 400 || l.LastRaftIndex() != want[399].RaftIndex {
		t.Fatalf("reopened: first %d last %d raft %d", l.FirstLSN(), l.LastLSN(), l.LastRaftIndex())
	}
	active := segs[len(segs)-1]
	sameTxns(t, readAll(t, l, active.FirstLSN, 0), want[active.FirstLSN-1:])
	for _, lsn := range []types.LSN{1, segs[1].FirstLSN + 3, active.FirstLSN - 1} {
		if _, err := l.Get(lsn); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Get(%d) in an overwritten sealed segment: %v, want ErrCorrupt", lsn, err)
		}
	}
	if err := l.Read(1, 0, func(*logstorepb.Transaction) (bool, error) { return true, nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read over overwritten sealed segments: %v, want ErrCorrupt", err)
	}
	if _, err := l.TopicOffsetLSN("orders", 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("TopicOffsetLSN into an overwritten sealed segment: %v, want ErrCorrupt", err)
	}
}

// TestSealedCorruptionIsErrCorrupt: a flipped byte inside a sealed segment is
// found when read. The damaged record is ErrCorrupt, and so are the records
// after it up to the next sparse index entry (a scan cannot cross it); every
// other record reads fine.
func TestSealedCorruptionIsErrCorrupt(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	want, segs := sealedLog(t, o, 400)
	s := segs[1]
	path := filepath.Join(dir, s.Name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(len(data) / 2)
	// Find the damaged record by walking the intact file.
	damaged, damagedPos := s.FirstLSN, int64(0)
	for pos := int64(0); ; damaged++ {
		_, n, err := splitRecord(data[pos:])
		if err != nil {
			t.Fatal(err)
		}
		if pos+int64(n) > at {
			damagedPos = pos
			break
		}
		pos += int64(n)
	}
	flip(t, path, at)
	l := mustOpen(t, o)
	var bad []types.LSN
	for lsn := s.FirstLSN; lsn <= s.LastLSN; lsn++ {
		txn, err := l.Get(lsn)
		switch {
		case errors.Is(err, ErrCorrupt):
			bad = append(bad, lsn)
			if !strings.Contains(err.Error(), s.Name) {
				t.Fatalf("corruption error %q does not name the segment", err)
			}
		case err != nil:
			t.Fatalf("Get(%d): %v", lsn, err)
		case types.LSN(txn.Lsn) != lsn || txn.RaftIndex != want[lsn-1].RaftIndex:
			t.Fatalf("Get(%d) returned lsn %d", lsn, txn.Lsn)
		}
	}
	if len(bad) == 0 || bad[0] != damaged || bad[len(bad)-1]-bad[0] != types.LSN(len(bad)-1) {
		t.Fatalf("records %v reported corrupt, want a run starting at the damaged lsn %d", bad, damaged)
	}
	recordBytes := int64(len(data)) / int64(s.LastLSN-s.FirstLSN+1)
	if reach := int64(len(bad)-1) * recordBytes; reach > o.IndexIntervalBytes+recordBytes {
		t.Fatalf("%d records after the damaged one at byte %d are unreadable: more than an index interval", len(bad)-1, damagedPos)
	}
	// The other segments read fine.
	sameTxns(t, readAll(t, l, segs[2].FirstLSN, 0), want[segs[2].FirstLSN-1:])
}

func TestOpenRejectsBadSealedSegments(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string, s SegmentInfo)
	}{
		{"index missing", func(t *testing.T, dir string, s SegmentInfo) {
			if err := os.Remove(filepath.Join(dir, strings.TrimSuffix(s.Name, segExt)+idxExt)); err != nil {
				t.Fatal(err)
			}
		}},
		{"index flipped byte", func(t *testing.T, dir string, s SegmentInfo) {
			flip(t, filepath.Join(dir, strings.TrimSuffix(s.Name, segExt)+idxExt), 40)
		}},
		{"index cut", func(t *testing.T, dir string, s SegmentInfo) {
			p := filepath.Join(dir, strings.TrimSuffix(s.Name, segExt)+idxExt)
			truncate(t, p, fileSize(t, p)-1)
		}},
		{"segment cut", func(t *testing.T, dir string, s SegmentInfo) {
			p := filepath.Join(dir, s.Name)
			truncate(t, p, fileSize(t, p)-1)
		}},
		{"segment grown", func(t *testing.T, dir string, s SegmentInfo) {
			appendBytes(t, filepath.Join(dir, s.Name), []byte{0})
		}},
		{"segment missing", func(t *testing.T, dir string, s SegmentInfo) {
			if err := os.Remove(filepath.Join(dir, s.Name)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir)
			_, segs := sealedLog(t, o, 400)
			tc.damage(t, dir, segs[1])
			l, err := Open(o)
			if !errors.Is(err, ErrCorrupt) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestCrashWhileSealing: an index file written for the active segment (the
// next segment file not created yet) is dropped at Open and rebuilt.
func TestCrashWhileSealing(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	want, segs := sealedLog(t, o, 400)
	last := segs[len(segs)-1]
	prev := segs[len(segs)-2]
	// Make the previous segment the active one again, as if the seal
	// crashed after writing its index and before creating the next file.
	if err := os.Remove(filepath.Join(dir, last.Name)); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, o)
	if l.LastLSN() != prev.LastLSN {
		t.Fatalf("LastLSN %d, want %d", l.LastLSN(), prev.LastLSN)
	}
	if _, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(prev.Name, segExt)+idxExt)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the active segment's stale index file is still there: %v", err)
	}
	more := appendN(t, l, genAfter(int(prev.LastLSN)), int(last.LastLSN-prev.LastLSN))
	sameTxns(t, more, want[prev.LastLSN:])
	if got := l.Segments(); len(got) != len(segs) || got[len(got)-2] != prev {
		t.Fatalf("segments after re-sealing differ:\n%+v\nwant\n%+v", got, segs)
	}
	sameTxns(t, readAll(t, l, 1, 0), want)
}

func TestOpenCleansUp(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	want, segs := sealedLog(t, o, 200)
	orphan := filepath.Join(dir, idxFileName(segs[len(segs)-1].LastLSN+100))
	tmp := filepath.Join(dir, segs[0].Name+tmpExt)
	other := filepath.Join(dir, "README")
	for _, p := range []string{orphan, tmp, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := mustOpen(t, o)
	sameTxns(t, readAll(t, l, 1, 0), want)
	for _, p := range []string{orphan, tmp} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s survived Open: %v", p, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("Open removed a file that is not its own: %v", err)
	}
}
