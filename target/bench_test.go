package target_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
)

// BenchmarkDeliver measures the SDK alone (gRPC on loopback, in-memory
// store, no fsync): deliveries/s and batch ack latency p50/p99 for batches
// of `batch` one-message deliveries with at most `inflight` batches unacked.
func BenchmarkDeliver(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		for _, inflight := range []int{1, 8} {
			b.Run(fmt.Sprintf("batch=%d/inflight=%d", batch, inflight), func(b *testing.B) {
				_, addr := targettest.Serve(b, target.Config{TargetID: "t1", Store: &targettest.MemStore{Forget: true},
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				s, _, err := targettest.Open(targettest.Context(b), targettest.Dial(b, addr), targettest.Hello("t1", 1, 1))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				log := targettest.NewLog()
				value := make([]byte, 256)
				batches := make([][]*targetpb.Delivery, b.N)
				for i := range batches {
					for range batch {
						batches[i] = append(batches[i], log.Txn(targettest.Part{Topic: "a", Values: [][]byte{value}}))
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				lat, elapsed, err := targettest.Pipeline(targettest.Context(b), s, batches, inflight)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "deliveries/s")
				b.ReportMetric(float64(quantile.Of(lat, 0.5).Microseconds())/1000, "p50-ack-ms")
				b.ReportMetric(float64(quantile.Of(lat, 0.99).Microseconds())/1000, "p99-ack-ms")
			})
		}
	}
}
