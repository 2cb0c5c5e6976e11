package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunReport: a tiny run prints its table; an invalid config is an
// error with nothing printed.
func TestRunReport(t *testing.T) {
	var out bytes.Buffer
	cfg := Config{Targets: []int{2}, TxnKB: []int{1}, Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond}
	if err := RunReport(context.Background(), &out, nil, cfg, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| 2 | 1 KB |") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	if err := RunReport(context.Background(), &out, nil, Config{Targets: []int{0}}, false); err == nil || out.Len() != 0 {
		t.Errorf("invalid config: %v, printed %q", err, out.String())
	}
}

// TestParseChildSpec reads back what SpawnSelf gives a child.
func TestParseChildSpec(t *testing.T) {
	cmd := SpawnSelf("exe", []string{"bench", "player", "--child"}, nil, 0)("target", "t 1")
	args, err := ParseChildSpec(cmd.Args[len(cmd.Args)-1])
	if err != nil || strings.Join(args, "|") != "target|t 1" {
		t.Fatalf("ParseChildSpec: %q, %v", args, err)
	}
	if _, err := ParseChildSpec("[1"); err == nil {
		t.Fatal("a broken spec parsed")
	}
}
