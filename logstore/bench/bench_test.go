package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunSmall runs a short table and checks it is complete and sane.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	table, err := Run(ctx, Config{Clients: []int{1, 8}, Duration: time.Second, Warmup: 300 * time.Millisecond, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := table.String()
	t.Logf("\n%s", out)
	want := []struct {
		system  string
		clients int
	}{{SystemLogStore, 1}, {SystemBareRaft, 1}, {SystemLogStore, 8}, {SystemBareRaft, 8}}
	if len(table.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(table.Rows), len(want))
	}
	for i, r := range table.Rows {
		if r.System != want[i].system || r.Clients != want[i].clients {
			t.Errorf("row %d is %s × %d, want %s × %d (levels interleaved)", i, r.System, r.Clients, want[i].system, want[i].clients)
		}
		if r.Txns == 0 || r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 || r.P999 < r.P99 {
			t.Errorf("bad row %+v", r)
		}
		// Every LogStore entry carries at least one txn; bare raft rows
		// have no aggregation.
		if (r.System == SystemLogStore) != (r.TxnsPerEntry >= 1) || (r.System == SystemLogStore) != (r.AppendsPerCall >= 1) {
			t.Errorf("row %+v: txns per entry %.2f, per call %.2f", r, r.TxnsPerEntry, r.AppendsPerCall)
		}
	}
	// Without coalescing every transaction is a call of its own.
	plain, err := Run(ctx, Config{Clients: []int{4}, Duration: time.Second, Warmup: 300 * time.Millisecond, Dir: t.TempDir(),
		SkipBareRaft: true, PlainAppends: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := plain.Rows[0]; r.Txns == 0 || r.AppendsPerCall != 1 {
		t.Errorf("plain appends: %+v, want exactly 1 txn per call", r)
	}
	for _, s := range []string{"\n| 1 | ", "\n| 8 | ", "tx/s logstore/bare", "p50 logstore/bare", "p99.9", "Goals (DESIGN.md §10)"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

// TestTableString checks the ratio columns and goal marks on fixed rows.
func TestTableString(t *testing.T) {
	ms := time.Millisecond
	table := Table{Rows: []Row{
		{System: SystemLogStore, Clients: 1, TxPerSec: 100, P50: 11 * ms, P99: 20 * ms, P999: 30 * ms, TxnsPerEntry: 1, AppendsPerCall: 1},
		{System: SystemBareRaft, Clients: 1, TxPerSec: 110, P50: 10 * ms, P99: 20 * ms, P999: 30 * ms},
		{System: SystemLogStore, Clients: 64, TxPerSec: 3000, P50: 20 * ms, P99: 40 * ms, P999: 50 * ms, TxnsPerEntry: 40.5, AppendsPerCall: 12.25},
		{System: SystemBareRaft, Clients: 64, TxPerSec: 1000, P50: 60 * ms, P99: 90 * ms, P999: 99 * ms, Errors: 2},
		{System: SystemLogStore, Clients: 256, TxPerSec: 9000, P50: 20 * ms, P99: 40 * ms, P999: 50 * ms, TxnsPerEntry: 90, AppendsPerCall: 30},
	}}
	out := table.String()
	for _, s := range []string{
		"| 1 | 100 | 110 | 0.91× | 11.00 ms / 20.00 ms / 30.00 ms | 10.00 ms / 20.00 ms / 30.00 ms | 1.10× ok | 1.0 | 1.0 | 0 |",
		"| 64 | 3000 | 1000 | 3.00× MISS | 20.00 ms / 40.00 ms / 50.00 ms | 60.00 ms / 90.00 ms / 99.00 ms | 0.33× | 12.2 | 40.5 | 2 |",
		"| 256 | 9000 | – | – | 20.00 ms / 40.00 ms / 50.00 ms | – | – | 30.0 | 90.0 | 0 |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks line\n%s\n in\n%s", s, out)
		}
	}
}

// BenchmarkAppend drives b.N Appends split over clients goroutines against a
// 3-node cluster (fsync on), reporting latency percentiles and transactions
// per Raft entry; BenchmarkBareRaft is the reference, same shape.
func BenchmarkAppend(b *testing.B) {
	for _, clients := range []int{1, 10, 64, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c, err := StartCluster(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := Config{}
			_ = cfg.validate()
			op, closeFn, err := appendOp(c, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer closeFn()
			before := c.batchStats()
			row := measureN(b, clients, op)
			perEntry, perCall := c.batchStats().since(before)
			row.report(b)
			b.ReportMetric(perEntry, "txns/entry")
			b.ReportMetric(perCall, "txns/call")
		})
	}
}

func BenchmarkBareRaft(b *testing.B) {
	for _, clients := range []int{1, 10, 64, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			br, err := startBareRaft(b.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			defer br.close()
			payload := make([]byte, 2*256)
			measureN(b, clients, func(context.Context) error {
				return br.leader().Apply(payload, 10*time.Second).Error()
			}).report(b)
		})
	}
}

type lats []time.Duration

func (l lats) p(q float64) float64 {
	if len(l) == 0 {
		return 0
	}
	return float64(l[min(len(l)-1, int(q*float64(len(l))))]) / float64(time.Millisecond)
}

func (l lats) report(b *testing.B) {
	b.ReportMetric(l.p(0.5), "p50-ms")
	b.ReportMetric(l.p(0.99), "p99-ms")
	b.ReportMetric(l.p(0.999), "p999-ms")
}

func measureN(b *testing.B, clients int, op func(context.Context) error) lats {
	b.ReportAllocs()
	b.ResetTimer()
	var mu sync.Mutex
	var all lats
	var wg sync.WaitGroup
	per := (b.N + clients - 1) / clients
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine lats
			for range per {
				t0 := time.Now()
				if err := op(context.Background()); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return all
}
