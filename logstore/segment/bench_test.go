package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// benchTxn is the transaction of docs/DESIGN.md, "Numbers to beat": 2 topics × one 256-byte message.
type benchTxn struct {
	txn *logstorepb.Transaction
}

func newBenchTxn() *benchTxn {
	value := bytes.Repeat([]byte("v"), 256)
	return &benchTxn{txn: &logstorepb.Transaction{
		Slices: []*logstorepb.TxnSlice{
			{Topic: "orders", Messages: []*logstorepb.Message{{Value: value}}},
			{Topic: "stock", Messages: []*logstorepb.Message{{Value: value}}},
		},
	}}
}

// next makes the transaction the next one after lsn-1 (it is reused: Append
// does not keep it).
func (b *benchTxn) next(lsn uint64) *logstorepb.Transaction {
	b.txn.Lsn = lsn
	b.txn.RaftIndex = (lsn + 7) / 8 // 8 transactions per Raft entry
	b.txn.TimestampUnixNano = int64(lsn)
	for _, sl := range b.txn.Slices {
		sl.FirstOffset = lsn - 1
	}
	return b.txn
}

func benchOptions(dir string) Options {
	return Options{Dir: dir, Logger: quietLogger}
}

// BenchmarkAppend measures Append on the apply path (default options: 64 MiB
// segments, so sealing with its fsyncs shows up once per 64 MiB), alone and
// with tailing readers, reporting per-append latency percentiles.
func BenchmarkAppend(b *testing.B) {
	for _, readers := range []int{0, 4} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			l, err := Open(benchOptions(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			bt := newBenchTxn()
			frame, _ := appendRecord(nil, bt.next(1))
			// Tailing readers wait for a wake-up when caught up, as the
			// LogStore's read streams wait for the head to advance.
			done := make(chan struct{})
			wake := make([]chan struct{}, readers)
			var wg sync.WaitGroup
			var read atomic.Int64
			for r := range readers {
				wake[r] = make(chan struct{}, 1) // one pending wake-up is enough
				wg.Go(func() {
					next := uint64(1)
					for {
						_ = l.Read(types.LSN(next), 0, func(txn *logstorepb.Transaction) (bool, error) {
							next = txn.Lsn + 1
							read.Add(1)
							return true, nil
						})
						select {
						case <-wake[r]:
						case <-done:
							return
						}
					}
				})
			}
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if err := l.Append(bt.next(uint64(i) + 1)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				for _, w := range wake {
					select {
					case w <- struct{}{}:
					default:
					}
				}
			}
			b.StopTimer()
			close(done)
			wg.Wait()
			reportPercentiles(b, lat)
			if readers > 0 {
				b.ReportMetric(float64(read.Load())/float64(b.N), "reads/append")
			}
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p999-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	var sum, over time.Duration
	for _, d := range lat {
		sum += d
		if d > time.Millisecond {
			over += d
		}
	}
	b.ReportMetric(100*float64(over)/float64(sum), "%time-in-ops>1ms")
}

// BenchmarkReadFrom measures a read stream starting at a random LSN of a
// 40 MiB log in 4 MiB segments (so most starts are in sealed segments and
// seek through the sparse index), for several stream lengths.
func BenchmarkReadFrom(b *testing.B) {
	const total = 60000 // ~40 MiB
	o := benchOptions(b.TempDir())
	o.SegmentBytes = 4 << 20
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	bt := newBenchTxn()
	for i := uint64(1); i <= total; i++ {
		if err := l.Append(bt.next(i)); err != nil {
			b.Fatal(err)
		}
	}
	recordBytes := l.SizeBytes() / total
	for _, records := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(int64(records) * recordBytes)
			b.ReportAllocs()
			for range b.N {
				from := 1 + rng.Uint64N(total-uint64(records))
				n := 0
				err := l.Read(types.LSN(from), types.LSN(from+uint64(records)-1), func(*logstorepb.Transaction) (bool, error) {
					n++
					return true, nil
				})
				if err != nil || n != records {
					b.Fatalf("read %d records from %d: %v", n, from, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
		})
	}
}

// BenchmarkTopicOffsetLSN measures the seek of a topic read to an offset.
func BenchmarkTopicOffsetLSN(b *testing.B) {
	const total = 60000
	o := benchOptions(b.TempDir())
	o.SegmentBytes = 4 << 20
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	bt := newBenchTxn()
	for i := uint64(1); i <= total; i++ {
		if err := l.Append(bt.next(i)); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for range b.N {
		off := rng.Uint64N(total)
		if lsn, err := l.TopicOffsetLSN("orders", types.Offset(off)); err != nil || lsn != types.LSN(off+1) {
			b.Fatalf("TopicOffsetLSN(orders, %d) = %d, %v", off, lsn, err)
		}
	}
}

// BenchmarkOpen measures a restart: the time grows with the active segment
// (scanned), not with the sealed data (only index files are read).
func BenchmarkOpen(b *testing.B) {
	for _, sealedMiB := range []int{4, 64} {
		for _, activeMiB := range []int{1, 8} {
			b.Run(fmt.Sprintf("sealed=%dMiB/active=%dMiB", sealedMiB, activeMiB), func(b *testing.B) {
				o := benchOptions(b.TempDir())
				o.SegmentBytes = 4 << 20
				l, err := Open(o)
				if err != nil {
					b.Fatal(err)
				}
				bt := newBenchTxn()
				lsn := uint64(0)
				for sealed := int64(0); sealed < int64(sealedMiB)<<20; {
					lsn++
					if err := l.Append(bt.next(lsn)); err != nil {
						b.Fatal(err)
					}
					segs := l.Segments()
					sealed = l.SizeBytes() - segs[len(segs)-1].Bytes
				}
				// Grow the active segment to activeMiB without sealing it.
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				o.SegmentBytes = int64(activeMiB+1) << 20
				if l, err = Open(o); err != nil {
					b.Fatal(err)
				}
				for l.Segments()[len(l.Segments())-1].Bytes < int64(activeMiB)<<20 {
					lsn++
					if err := l.Append(bt.next(lsn)); err != nil {
						b.Fatal(err)
					}
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					l, err := Open(o)
					if err != nil {
						b.Fatal(err)
					}
					if l.LastLSN() != types.LSN(lsn) {
						b.Fatalf("reopened at %d, want %d", l.LastLSN(), lsn)
					}
					_ = l.Close()
				}
			})
		}
	}
}

// BenchmarkSeal measures the seal that an Append runs on the apply path when
// the active segment is full (fsync of the segment, index file written and
// fsynced through a rename, next file created, directory fsynced), with the
// default 64 MiB segments, with and without the background writeback that
// spreads the segment's flushing over its filling. Each iteration fills a
// segment untimed, then times the one Append that seals it.
func BenchmarkSeal(b *testing.B) {
	for _, wb := range []struct {
		name  string
		bytes int64
	}{{"writeback=1MiB", DefaultWritebackBytes}, {"writeback=off", 1 << 40}} {
		b.Run(wb.name, func(b *testing.B) {
			o := benchOptions(b.TempDir())
			o.WritebackBytes = wb.bytes
			l, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			bt := newBenchTxn()
			bts := make([]*benchTxn, 64) // one Raft entry's transactions
			for i := range bts {
				bts[i] = newBenchTxn()
			}
			batch := make([]*logstorepb.Transaction, len(bts))
			frame, _ := appendRecord(nil, bt.next(1))
			frameBytes := int64(len(frame))
			lsn := uint64(1)
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				seals := l.Stats().Seals
				for {
					active := l.Segments()[len(l.Segments())-1]
					if active.Bytes >= DefaultSegmentBytes {
						break
					}
					if active.Bytes+2*int64(len(bts))*frameBytes < DefaultSegmentBytes {
						for i, t := range bts {
							batch[i] = t.next(lsn)
							lsn++
						}
						if err := l.AppendBatch(batch); err != nil {
							b.Fatal(err)
						}
					} else { // close to full: one at a time, up to the brim
						if err := l.Append(bt.next(lsn)); err != nil {
							b.Fatal(err)
						}
						lsn++
					}
					if l.Stats().Seals != seals {
						b.Fatal("sealed while filling")
					}
				}
				b.StartTimer()
				start := time.Now()
				if err := l.Append(bt.next(lsn)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				lsn++
				if l.Stats().Seals != seals+1 {
					b.Fatal("the timed append did not seal")
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50-seal-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1e3, "max-seal-ms")
		})
	}
}
