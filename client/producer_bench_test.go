package client_test

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// BenchmarkProducerInFlight measures one producer's throughput with 1 and
// 5 Appends in flight (one 100-byte message each) on an in-process 3-node
// cluster, and prints a markdown table (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench BenchmarkProducerInFlight -benchtime 2000x ./client/
func BenchmarkProducerInFlight(b *testing.B) {
	c := logstoretest.Start(b, 3, nil)
	cl := newClient(b, c.Addrs()...)
	type row struct {
		inflight int
		txps     float64
		perTxn   time.Duration
		gaps     float64
	}
	var rows []row
	for _, inflight := range []int{1, 5} {
		var last row
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			b.ReportAllocs()
			p := newProducer(b, cl, client.ProducerConfig{MaxInFlight: inflight})
			ctx := ctxT(b, 10*time.Minute)
			if _, err := p.Append(ctx, client.NewTxn().Add("bench", make([]byte, 100))); err != nil { // registers
				b.Fatal(err)
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range inflight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if _, err := p.Append(ctx, client.NewTxn().Add("bench", make([]byte, 100))); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			last = row{inflight: inflight, txps: float64(b.N) / el.Seconds(), perTxn: el / time.Duration(b.N)}
			b.ReportMetric(last.txps, "tx/s")
			last.gaps = float64(client.GapRetries(p)) / float64(b.N)
			b.ReportMetric(last.gaps, "gaps/op")
		})
		rows = append(rows, last)
	}
	fmt.Fprintln(os.Stdout, "\n| producers | in flight | tx/s | time per txn | gap refusals per txn |\n| ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Fprintf(os.Stdout, "| 1 | %d | %.0f | %v | %.2f |\n", r.inflight, r.txps, r.perTxn.Round(time.Microsecond), r.gaps)
	}
}
