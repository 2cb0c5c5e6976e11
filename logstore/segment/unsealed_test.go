package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/types"
)

// TestUnsealedSegmentRecovers: a crash (power loss) after a segment was
// sealed in memory and the next one started, but before the background seal
// made it durable, leaves a non-last segment without its index file and
// possibly torn. Open keeps what is whole: a whole segment gets its index
// rebuilt; a torn one is cut after its last good record and the segments
// after it (which no longer follow) are dropped. Appending the same records
// again then ends byte-identical to a log that never crashed.
func TestUnsealedSegmentRecovers(t *testing.T) {
	const n = 400
	cases := []struct {
		name string
		// damage changes segment s (its index already removed) and returns
		// the last LSN that survives.
		damage func(t *testing.T, path string, s SegmentInfo) types.LSN
	}{
		{"whole", func(t *testing.T, _ string, _ SegmentInfo) types.LSN { return n }},
		{"cut inside a record", func(t *testing.T, path string, s SegmentInfo) types.LSN {
			truncate(t, path, fileSize(t, path)/2)
			return lastWholeLSN(t, path, s.FirstLSN)
		}},
		{"cut at a record boundary", func(t *testing.T, path string, s SegmentInfo) types.LSN {
			truncate(t, path, recordEnd(t, path, 3))
			return s.FirstLSN + 2
		}},
		{"empty", func(t *testing.T, path string, s SegmentInfo) types.LSN {
			truncate(t, path, 0)
			return s.FirstLSN - 1
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir)
			want, segs := sealedLog(t, o, n)
			s := segs[1]
			path := filepath.Join(dir, s.Name)
			if err := os.Remove(filepath.Join(dir, strings.TrimSuffix(s.Name, segExt)+idxExt)); err != nil {
				t.Fatal(err)
			}
			last := tc.damage(t, path, s)
			l, err := Open(o)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			if l.LastLSN() != last {
				t.Fatalf("LastLSN %d, want %d", l.LastLSN(), last)
			}
			sameTxns(t, readAll(t, l, 1, 0), want[:last])
			if last < n {
				appendN(t, l, genAfter(int(last)), n-int(last))
			}
			sameTxns(t, readAll(t, l, 1, 0), want)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			ref := t.TempDir()
			sealedLog(t, testOptions(ref), n)
			sameDirs(t, dir, ref)
		})
	}
}

// lastWholeLSN returns the LSN of the last whole record of the segment file
// at path whose first record is base (base-1 if none).
func lastWholeLSN(t *testing.T, path string, base types.LSN) types.LSN {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lsn := base - 1
	for len(b) > 0 {
		_, n, err := splitRecord(b)
		if err != nil {
			break
		}
		b = b[n:]
		lsn++
	}
	return lsn
}

// recordEnd returns the byte position after the first k records of the
// segment file at path.
func recordEnd(t *testing.T, path string, k int) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(0)
	for range k {
		_, n, err := splitRecord(b[pos:])
		if err != nil {
			t.Fatal(err)
		}
		pos += int64(n)
	}
	return pos
}

// sameDirs fails unless dirs a and b hold the same segment and index files
// with the same bytes.
func sameDirs(t *testing.T, a, b string) {
	t.Helper()
	read := func(dir string) map[string][]byte {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{}
		for _, e := range entries {
			if _, _, ok := parseFileName(e.Name()); !ok {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = data
		}
		return out
	}
	fa, fb := read(a), read(b)
	if len(fa) != len(fb) {
		t.Fatalf("%d files, want %d", len(fa), len(fb))
	}
	for name, data := range fb {
		got, ok := fa[name]
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s differs (%d bytes, want %d)", name, len(got), len(data))
		}
	}
}
