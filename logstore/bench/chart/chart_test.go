package chart

import (
	"errors"
	"image/png"
	"os"
	"testing"
	"time"

	"github.com/logplayer/logplayer/logstore/bench"
)

// TestWrite draws a table of two systems at two levels and checks every
// chart is a PNG of the size asked for.
func TestWrite(t *testing.T) {
	ms := time.Millisecond
	tab := bench.Table{Rows: []bench.Row{
		{System: bench.LogStoreWAL, Clients: 1, TxPerSec: 1000, P50: 1 * ms, P99: 2 * ms},
		{System: bench.RaftWAL, Clients: 1, TxPerSec: 1100, P50: 800 * time.Microsecond, P99: 2 * ms},
		{System: bench.LogStoreWAL, Clients: 64, TxPerSec: 20000, P50: 3 * ms, P99: 6 * ms},
		{System: bench.RaftWAL, Clients: 64, TxPerSec: 10000, P50: 6 * ms, P99: 9 * ms},
	}}
	dir := t.TempDir()
	paths, err := Write(tab, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(Charts) {
		t.Fatalf("wrote %v, want %d charts", paths, len(Charts))
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
			t.Errorf("%s is %v", p, b)
		}
	}
	if _, err := Write(bench.Table{}, dir); !errors.Is(err, ErrEmptyTable) {
		t.Errorf("empty table: %v", err)
	}
}
