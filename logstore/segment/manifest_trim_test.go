package segment

import (
	"fmt"
	"testing"

	"github.com/logplayer/logplayer/types"
)

// manifestOf builds a valid manifest of sealed segments of the given
// sizes (records per segment) starting at lsn first, plus a last segment.
func manifestOf(first types.LSN, counts ...types.LSN) Manifest {
	m := Manifest{FirstLSN: first}
	next := first
	for i, c := range counts {
		f := FileInfo{Name: segFileName(next), Bytes: int64(c) * 10, FirstLSN: next, LastLSN: next + c - 1}
		m.Files = append(m.Files, f)
		if i < len(counts)-1 {
			m.Files = append(m.Files, FileInfo{Name: idxFileName(next), Bytes: 8, FirstLSN: f.FirstLSN, LastLSN: f.LastLSN})
		}
		next += c
	}
	m.LastLSN = next - 1
	return m
}

func TestManifestTrimBefore(t *testing.T) {
	m := manifestOf(1, 10, 10, 10, 5) // segments 1-10, 11-20, 21-30, last 31-35
	if err := m.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lsn       types.LSN
		wantFirst types.LSN
		dropped   int
	}{
		{1, 1, 0},
		{10, 1, 0},  // 1-10 still holds lsn 10
		{11, 11, 2}, // 1-10 wholly below
		{25, 21, 4},
		{31, 31, 6},
		{1000, 31, 6}, // the last segment always stays
	} {
		t.Run(fmt.Sprint(tc.lsn), func(t *testing.T) {
			got, dropped := m.TrimBefore(tc.lsn)
			if got.FirstLSN != tc.wantFirst || len(dropped) != tc.dropped {
				t.Fatalf("TrimBefore(%d) = first %d, %d dropped; want %d, %d", tc.lsn, got.FirstLSN, len(dropped), tc.wantFirst, tc.dropped)
			}
			if got.LastLSN != m.LastLSN || len(got.Files)+len(dropped) != len(m.Files) {
				t.Fatalf("TrimBefore(%d) lost files or moved the end: %+v", tc.lsn, got)
			}
			if err := got.validate(); err != nil {
				t.Fatalf("TrimBefore(%d) is invalid: %v", tc.lsn, err)
			}
		})
	}
	// The input is not modified.
	if err := m.validate(); err != nil || m.FirstLSN != 1 || len(m.Files) != 7 {
		t.Fatalf("input changed: %+v, %v", m, err)
	}
}
