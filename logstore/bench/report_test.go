package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunReport: a short run prints its table, writes it as JSON and a CPU
// profile; an invalid config is an error with nothing printed.
func TestRunReport(t *testing.T) {
	dir := t.TempDir()
	jsonFile, profile := filepath.Join(dir, "rows.json"), filepath.Join(dir, "cpu.pprof")
	var out bytes.Buffer
	cfg := Config{Clients: []int{1}, Systems: []System{GRPCConns}, Duration: 100 * time.Millisecond, Warmup: 10 * time.Millisecond, Dir: dir}
	if err := RunReport(context.Background(), &out, nil, cfg, ReportOptions{JSONFile: jsonFile, CPUProfile: profile}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\n| 1 | grpc-conns | ") {
		t.Errorf("table:\n%s", out.String())
	}
	var rows Table
	if b, err := os.ReadFile(jsonFile); err != nil || json.Unmarshal(b, &rows) != nil || len(rows.Rows) != 1 {
		t.Errorf("JSON file: %d rows, %v", len(rows.Rows), err)
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("CPU profile: %v", err)
	}
	out.Reset()
	if err := RunReport(context.Background(), &out, nil, Config{Systems: []System{"nope"}}, ReportOptions{}); err == nil || out.Len() != 0 {
		t.Errorf("invalid config: %v, printed %q", err, out.String())
	}
}
