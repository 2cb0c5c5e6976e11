package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv marks this test binary, re-executed, as a benchmark child
// process (Config.Spawn).
const childEnv = "LOGPLAYER_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := ServeChild(context.Background(), os.Args[1:], os.Stdin, os.Stdout, nil); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// spawnSelf runs children as this test binary.
func spawnSelf(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}

// A tiny run produces a well-formed table with samples in every column,
// with everything in this process and with the LogStore and the targets in
// child processes.
func TestRunSmall(t *testing.T) {
	for _, procs := range []bool{false, true} {
		t.Run(fmt.Sprintf("processes=%v", procs), func(t *testing.T) {
			cfg := Config{Targets: []int{2}, TxnKB: []int{1, 3}, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond}
			if procs {
				cfg.Spawn = spawnSelf
			}
			checkSmall(t, cfg)
		})
	}
}

func checkSmall(t *testing.T, cfg Config) {
	table, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 2 {
		t.Fatalf("rows: %+v", table.Rows)
	}
	for _, r := range table.Rows {
		if r.Txns == 0 || r.Player.N == 0 || r.Apply.N == 0 || r.Player.P50 <= 0 || r.Apply.P99 < r.Apply.P50 ||
			r.Bare.N == 0 || r.Bare.P99 < r.Bare.P50 ||
			r.Apply.P50 < r.Append.P50/2 {
			t.Errorf("row %+v", r)
		}
		// Each transaction reaches one target per distinct shard it touches.
		if r.Player.N < r.Txns || r.Player.N > r.Txns*min(r.TxnKB, r.Targets) {
			t.Errorf("%d player samples for %d txns of %d KB", r.Player.N, r.Txns, r.TxnKB)
		}
	}
	s := table.String()
	if !strings.Contains(s, "| 2 | 3 KB |") || strings.Contains(s, "own process") != (cfg.Spawn != nil) ||
		!strings.Contains(s, "bare p50/p99: ") {
		t.Errorf("table:\n%s", s)
	}
	t.Logf("\n%s", s)
}

func TestConfigRejects(t *testing.T) {
	for _, c := range []Config{{Targets: []int{0}}, {TxnKB: []int{-1}}, {Transactions: -1}} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

var processes = flag.Bool("processes", false, "BenchmarkPlayer: LogStore and targets in child processes "+
	"(then -cpuprofile and -trace show only the LogPlayer and the producer)")

// BenchmarkPlayer is Figures 9 and 10 as sub-benchmarks: b.N transactions
// per row (one producer), reporting the LogPlayer and apply delays.
//
//	go test -run '^$' -bench Player -benchtime 2000x ./logplayer/bench/ [-args -processes]
func BenchmarkPlayer(b *testing.B) {
	cfg := Config{}
	if *processes {
		cfg.Spawn = spawnSelf
	}
	env, err := NewEnv(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	for _, kb := range []int{1, 10} {
		for _, n := range []int{2, 5, 10, 20} {
			b.Run(fmt.Sprintf("targets=%d/txn=%dKB", n, kb), func(b *testing.B) {
				env.cfg.Transactions = b.N
				row, err := env.Row(context.Background(), n, kb)
				if err != nil {
					b.Fatal(err)
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(row.Player.Avg), "player-avg-ms")
				b.ReportMetric(ms(row.Player.P50), "player-p50-ms")
				b.ReportMetric(ms(row.Player.P99), "player-p99-ms")
				b.ReportMetric(ms(row.Bare.P50), "bare-p50-ms")
				b.ReportMetric(ms(row.Apply.Avg), "apply-avg-ms")
				b.ReportMetric(ms(row.Apply.P50), "apply-p50-ms")
				b.ReportMetric(ms(row.Apply.P99), "apply-p99-ms")
				b.ReportMetric(row.TxPerSec, "tx/s")
			})
		}
	}
}
