package dispatcher

import (
	"fmt"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
)

// benchDrainEvery is how many dispatches the benchmarks let queue up before
// draining them (timer stopped): enough to amortise the stop, few enough to
// stay far below the queue bound.
const benchDrainEvery = 4096

// BenchmarkDispatch measures Dispatch with n targets, each subscribed to its
// own shard topic, and transactions of 2 slices of 256 bytes on two shards
// (the workload of docs/DESIGN.md, "Numbers to beat"): each transaction goes to 2 of the n targets.
// fanout=all subscribes every target to every shard instead.
//
//	go test ./dispatcher -run '^$' -bench Dispatch -benchmem
func BenchmarkDispatch(b *testing.B) {
	for _, fanout := range []string{"2", "all"} {
		for _, n := range []int{2, 5, 10, 20} {
			b.Run(fmt.Sprintf("fanout=%s/targets=%d", fanout, n), func(b *testing.B) {
				benchmarkDispatch(b, n, fanout == "all")
			})
		}
	}
}

func benchmarkDispatch(b *testing.B, n int, all bool) {
	d := New(Config{Queue: targetqueue.Config{MaxCount: 2 * benchDrainEvery, MaxBytes: 1 << 30}}, 0)
	shards := make([]string, n)
	for i := range shards {
		shards[i] = fmt.Sprintf("shard-%d", i)
	}
	for i, id := range shards {
		topics := []string{shards[i]}
		if all {
			topics = shards
		}
		if err := d.AddTarget(id, topics); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Return(id, 0); err != nil {
			b.Fatal(err)
		}
	}
	value := make([]byte, 256)
	txns := make([]*logstorepb.Transaction, benchDrainEvery)
	for i := range txns {
		txns[i] = &logstorepb.Transaction{Slices: []*logstorepb.TxnSlice{
			{Topic: shards[i%n], Messages: []*logstorepb.Message{{Value: value}}},
			{Topic: shards[(i+1)%n], Messages: []*logstorepb.Message{{Value: value}}},
		}}
	}
	drain := func() {
		for _, id := range shards {
			for {
				msgs, _ := d.NextBatch(id, 1024, 1<<30)
				if len(msgs) == 0 {
					break
				}
				d.Ack(id, msgs[len(msgs)-1].LSN)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tx := txns[i%benchDrainEvery]
		tx.Lsn = uint64(i) + 1
		if _, slow := d.Dispatch(tx, 0); slow != nil {
			b.Fatalf("slow targets %v", slow)
		}
		if (i+1)%benchDrainEvery == 0 {
			b.StopTimer()
			drain()
			b.StartTimer()
		}
	}
}
