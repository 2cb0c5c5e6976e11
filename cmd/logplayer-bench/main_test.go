package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/logstore/bench"
)

// chart reads the JSON 'bench store --json' writes and prints the PNGs it
// wrote; without --in it is a usage error.
func TestChart(t *testing.T) {
	dir := t.TempDir()
	b, err := json.Marshal(bench.Table{Rows: []bench.Row{
		{System: bench.LogStoreWAL, Clients: 1, TxPerSec: 1000, P50: time.Millisecond, P99: 2 * time.Millisecond},
		{System: bench.LogStoreWAL, Clients: 10, TxPerSec: 5000, P50: 2 * time.Millisecond, P99: 4 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "store.json")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"chart", "--in", in, "--out", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := strings.Fields(stdout.String()); len(got) != 3 || got[0] != filepath.Join(dir, "bench-store-txps.png") {
		t.Fatalf("printed %q, want the three PNG paths", got)
	}
	if code := run([]string{"chart"}, &stdout, &stderr); code != 2 {
		t.Fatalf("chart without --in: exit %d, want 2", code)
	}
	if code := run(nil, &stdout, &stderr); code != 2 {
		t.Fatalf("no command: exit %d, want 2", code)
	}
}
