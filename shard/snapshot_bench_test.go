package shard_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// BenchmarkCloneShard measures `target clone`'s data path between two
// served shards on loopback: Snapshot (bbolt Tx.WriteTo) → gRPC chunks →
// Restore (staged file, fsync, one bbolt transaction copying the buckets).
// The reported MB/s is of the snapshot's bytes (the bbolt file).
func BenchmarkCloneShard(b *testing.B) {
	for _, mb := range []int{8, 32} {
		b.Run(fmt.Sprintf("data=%dMB", mb), func(b *testing.B) {
			const topic = "s"
			src := start(b, shard.Config{Dir: b.TempDir(), ID: "a", Topics: []string{topic}})
			s, _, err := targettest.Open(targettest.Context(b), src.cc, targettest.Hello("a", 1, 1))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			log := targettest.NewLog()
			value := bytes.Repeat([]byte("v"), 4<<10)
			for i := range mb * 256 / 64 { // 64 puts of 4 KiB per delivery
				var vals [][]byte
				for j := range 64 {
					vals = append(vals, shard.EncodePut(fmt.Appendf(nil, "k%08d", i*64+j), value))
				}
				if err := s.Send([]*targetpb.Delivery{log.Txn(targettest.Part{Topic: topic, Values: vals})}...); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.WaitAck(targettest.Context(b), log.LSN()); err != nil {
				b.Fatal(err)
			}
			var n uint64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				id := types.TargetID(fmt.Sprint("b", i))
				dst := start(b, shard.Config{Dir: b.TempDir(), ID: id, Topics: []string{topic}})
				b.StartTimer()
				_, size, err := target.CopySnapshot(targettest.Context(b), src.cc, "a", dst.cc, id, nil)
				if err != nil {
					b.Fatal(err)
				}
				n = size
				b.StopTimer()
				dst.stop()
				b.StartTimer()
			}
			b.SetBytes(int64(n))
		})
	}
}
