package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// copySealed copies the sealed segment base of l (file and index) to dir
// and opens the copy.
func copySealed(t *testing.T, l *Log, base types.LSN, dir string) (*Sealed, string) {
	t.Helper()
	if err := l.Sync(); err != nil { // the sealer has written the index files
		t.Fatal(err)
	}
	for _, name := range []string{segFileName(base), idxFileName(base)} {
		b, err := os.ReadFile(filepath.Join(l.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	segPath := filepath.Join(dir, segFileName(base))
	s, err := OpenSealed(vfs.Default, segPath, filepath.Join(dir, idxFileName(base)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, segPath
}

// sealedBelow is a Below over copies of sealed segments (what
// logstore/tier serves from its cache), contiguous from the first.
type sealedBelow struct{ segs []*Sealed }

func (b *sealedBelow) Oldest(upTo types.LSN) types.LSN {
	if len(b.segs) == 0 || b.segs[len(b.segs)-1].LastLSN() < upTo {
		return upTo + 1
	}
	return b.segs[0].FirstLSN()
}

func (b *sealedBelow) Read(from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) error {
	for _, s := range b.segs {
		if from > s.LastLSN() || from > to {
			continue
		}
		stop := false
		err := s.Read(from, min(to, s.LastLSN()), func(txn *logstorepb.Transaction) (bool, error) {
			ok, err := fn(txn)
			stop = !ok || err != nil
			return ok, err
		})
		if err != nil || stop {
			return err
		}
		from = s.LastLSN() + 1
	}
	return nil
}

func (b *sealedBelow) TopicOffsetLSN(topic string, offset types.Offset) (types.LSN, error) {
	for _, s := range b.segs {
		if lsn, err := s.TopicOffsetLSN(topic, offset); err == nil {
			return lsn, nil
		}
	}
	return 0, ErrNotFound
}

func (b *sealedBelow) TopicFirstOffset(topic string, _ types.LSN) (types.Offset, bool) {
	for _, s := range b.segs {
		if r, ok := s.Topics()[topic]; ok {
			return r[0], true
		}
	}
	return 0, false
}

// TestReadThroughBelow: with the first segments deleted and their copies
// as the Below, Read, Get and TopicOffsetLSN from LSN 1 return what was
// appended, switching from the Below to the log at FirstLSN.
func TestReadThroughBelow(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	g := newGen()
	want := appendN(t, l, g, 600)
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments: too few for the test", len(segs))
	}
	b := &sealedBelow{}
	dir := t.TempDir()
	for _, s := range segs[:3] {
		c, _ := copySealed(t, l, s.FirstLSN, dir)
		b.segs = append(b.segs, c)
	}
	if _, err := l.DeleteBefore(segs[2].LastLSN + 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(1); !errors.Is(err, ErrBelowRetention) {
		t.Fatalf("Get(1) without a Below: %v, want ErrBelowRetention", err)
	}
	l.SetBelow(b)
	if got := l.OldestReadable(); got != 1 {
		t.Fatalf("OldestReadable = %d, want 1", got)
	}
	got := readAll(t, l, 1, 0)
	if len(got) != len(want) {
		t.Fatalf("read %d, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("lsn %d differs", want[i].Lsn)
		}
	}
	// A range ending below FirstLSN, and one stopping early.
	if part := readAll(t, l, 2, 5); len(part) != 4 || part[0].Lsn != 2 {
		t.Fatalf("Read(2, 5) = %d records", len(part))
	}
	n := 0
	if err := l.Read(1, 0, func(*logstorepb.Transaction) (bool, error) { n++; return n < 3, nil }); err != nil || n != 3 {
		t.Fatalf("stopped read: %d records, %v", n, err)
	}
	lsn, err := l.TopicOffsetLSN("orders", 0)
	if err != nil || lsn != 1 {
		t.Fatalf("TopicOffsetLSN(orders, 0) = %d, %v", lsn, err)
	}
	if off, ok := l.TopicFirstOffset("orders"); !ok || off != 0 {
		t.Fatalf("TopicFirstOffset(orders) = %d, %v", off, ok)
	}
}

// TestOpenSealedChecksTheFile: a copy with one byte changed is ErrCorrupt
// at OpenSealed (the index's whole-file CRC).
func TestOpenSealedChecksTheFile(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	appendN(t, l, newGen(), 300)
	dir := t.TempDir()
	base := l.Segments()[0].FirstLSN
	_, segPath := copySealed(t, l, base, dir)
	b, err := os.ReadFile(segPath)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(segPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSealed(vfs.Default, segPath, filepath.Join(dir, idxFileName(base))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenSealed of a changed copy: %v, want ErrCorrupt", err)
	}
}
