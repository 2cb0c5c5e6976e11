package shard_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target/targettest"
)

// BenchmarkApply measures a shard end to end over gRPC on loopback: batches
// of `batch` deliveries (one 256-byte PUT message each) sent with at most
// `inflight` batches unacked. It reports applied messages/s, the ack latency
// of a batch (send to cumulative ack covering it) p50/p99, and how many
// batches one bbolt commit carried on average (group commit).
func BenchmarkApply(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		for _, inflight := range []int{1, 8} {
			b.Run(fmt.Sprintf("batch=%d/inflight=%d", batch, inflight), func(b *testing.B) {
				benchApply(b, batch, inflight)
			})
		}
	}
}

func benchApply(b *testing.B, batch, inflight int) {
	const id = "shard-1"
	reg := prometheus.NewRegistry()
	r := start(b, shard.Config{Dir: b.TempDir(), ID: id, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s, _, err := targettest.Open(targettest.Context(b), r.cc, targettest.Hello(id, 1, 1))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	log := targettest.NewLog()
	value := make([]byte, 230)
	batches := make([][]*targetpb.Delivery, b.N)
	for i := range batches {
		for range batch {
			key := fmt.Appendf(nil, "key-%08d", rng.IntN(100_000))
			batches[i] = append(batches[i], log.Txn(targettest.Part{Topic: id, Values: [][]byte{shard.EncodePut(key, value)}}))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	latencies, elapsed, err := targettest.Pipeline(targettest.Context(b), s, batches, inflight)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	slices.Sort(latencies)
	ms := func(q float64) float64 { return float64(quantile.Of(latencies, q).Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(ms(0.50), "p50-ack-ms")
	b.ReportMetric(ms(0.99), "p99-ack-ms")
	if commits := commitCount(b, reg); commits > 0 {
		b.ReportMetric(float64(b.N)/float64(commits), "batches/commit")
	}
}

// commitCount is the number of Store.Apply calls, from target_apply_group_batches.
func commitCount(b *testing.B, reg *prometheus.Registry) uint64 {
	return uint64(testmetric.Value(b, reg, "target_apply_group_batches", nil))
}
