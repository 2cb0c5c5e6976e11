package bench

import (
	"context"
	"fmt"
	"sort"
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
	t.Logf("\n%s", table)
	if len(table.Rows) != 4 {
		t.Fatalf("%d rows, want 4", len(table.Rows))
	}
	for _, r := range table.Rows {
		if r.Txns == 0 || r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 || r.P999 < r.P99 {
			t.Errorf("bad row %+v", r)
		}
	}
}

// BenchmarkAppend drives b.N Appends split over clients goroutines against a
// 3-node cluster (fsync on), reporting latency percentiles.
func BenchmarkAppend(b *testing.B) {
	for _, clients := range []int{1, 10, 64, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c, err := StartCluster(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			row := measureN(b, clients, c)
			b.ReportMetric(row.p(0.5), "p50-ms")
			b.ReportMetric(row.p(0.99), "p99-ms")
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

func measureN(b *testing.B, clients int, c *Cluster) lats {
	cfg := Config{}
	_ = cfg.validate()
	op, closeFn, err := appendOp(c, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer closeFn()
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
