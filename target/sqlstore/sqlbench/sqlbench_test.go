package sqlbench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/pgtest"
	"github.com/logplayer/logplayer/target/sqlstore/sqlbench"
)

// One small row against a real PostgreSQL: both loaders wrote rows, the
// end-to-end latency has samples and its stage breakdown, and the table
// prints the goals.
func TestRunSmall(t *testing.T) {
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tab, err := sqlbench.Run(ctx, sqlbench.Config{DSN: pg.CreateDB("bench"), RowBytes: []int{1024}, BatchRows: []int{10},
		Duration: 500 * time.Millisecond, Warmup: 300 * time.Millisecond, Producers: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := tab[0]
	if r.BareRowsPerSec <= 0 || r.SinkRowsPerSec <= 0 || r.E2ESamples == 0 || r.BareCommitP50 <= 0 || r.AppendP50 <= 0 {
		t.Fatalf("row %+v: want rows and samples from both loaders", r)
	}
	if r.Stages.Samples == 0 || r.Stages.Apply.P50 <= 0 || r.BareCommitBesideP50 <= 0 {
		t.Fatalf("row %+v: want the stage breakdown and the bare probe beside the sink", r)
	}
	if s := tab.String(); !strings.Contains(s, "Goal sink ≥ 0.8× bare rows/s") || !strings.Contains(s, "recv → apply start") {
		t.Fatalf("table lacks the goal line:\n%s", s)
	}
	t.Logf("\n%s", tab)
}

// Paced producers: the sink gets about the rate asked for and groups
// little.
func TestRunPaced(t *testing.T) {
	pg := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tab, err := sqlbench.Run(ctx, sqlbench.Config{DSN: pg.CreateDB("bench"), RowBytes: []int{100}, BatchRows: []int{1},
		Duration: time.Second, Warmup: 300 * time.Millisecond, Producers: 2, Rate: 20})
	if err != nil {
		t.Fatal(err)
	}
	r := tab[0]
	// 20 transactions per second for 1s, whatever the machine's load: an
	// Append slower than the pace only lowers it.
	if r.AppendRowsPerSec <= 0 || r.AppendRowsPerSec > 30 || r.E2ESamples == 0 {
		t.Fatalf("row %+v: want at most ~20 appended rows/s and e2e samples", r)
	}
	t.Logf("\n%s", tab)
}

func TestConfigRejects(t *testing.T) {
	if _, err := sqlbench.Run(context.Background(), sqlbench.Config{}); err == nil {
		t.Fatal("Run without a DSN: nil error")
	}
	if _, err := sqlbench.Run(context.Background(), sqlbench.Config{DSN: "x", RowBytes: []int{0}}); err == nil {
		t.Fatal("Run with a 0-byte row: nil error")
	}
	if _, err := sqlbench.Run(context.Background(), sqlbench.Config{DSN: "x", Rate: -1}); err == nil {
		t.Fatal("Run with a negative rate: nil error")
	}
}
