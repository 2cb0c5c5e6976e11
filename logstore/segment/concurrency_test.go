package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// TestConcurrentReadersDuringAppends runs one writer with readers that tail
// the log, read random ranges, Get and look up topic offsets, plus retention
// and checkpoints, all at once (run with -race). Every record a reader sees
// must be exactly the one written with its LSN, and a tailing reader must see
// every LSN in order.
func TestConcurrentReadersDuringAppends(t *testing.T) {
	const n = 2000
	o := testOptions(t.TempDir())
	o.SegmentBytes = 32 << 10 // ~20 segments: sealing while reading
	l := mustOpen(t, o)
	g := newGen()
	want := make([]*logstorepb.Transaction, n)
	for i := range want {
		want[i] = g.txn()
	}
	oracle := topicOracle{}
	oracle.add(want...)

	var done atomic.Bool
	var freed, checkpoints atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	check := func(txn *logstorepb.Transaction) error {
		if txn.Lsn == 0 || txn.Lsn > n || !proto.Equal(txn, want[txn.Lsn-1]) {
			return fmt.Errorf("read lsn %d: not the record written", txn.Lsn)
		}
		return nil
	}
	// Readers racing retention may find their start deleted: that is the
	// one error they accept.
	retentionRace := func(err error) bool { return errors.Is(err, ErrBelowRetention) }

	// Tailing readers: every LSN once, in order.
	for r := range 2 {
		wg.Go(func() {
			next := types.LSN(1)
			for next <= n {
				if first := l.FirstLSN(); next < first {
					next = first // retention passed us
				}
				err := l.Read(next, 0, func(txn *logstorepb.Transaction) (bool, error) {
					if types.LSN(txn.Lsn) != next {
						return false, fmt.Errorf("tail %d: got lsn %d, want %d", r, txn.Lsn, next)
					}
					next++
					return true, check(txn)
				})
				if err != nil && !retentionRace(err) {
					fail(err)
					return
				}
			}
		})
	}
	// Random readers.
	for r := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for !done.Load() {
				last, first := l.LastLSN(), l.FirstLSN()
				if last < first {
					continue
				}
				from := first + types.LSN(rng.Uint64N(uint64(last-first+1)))
				to := from + types.LSN(rng.Uint64N(50))
				count := types.LSN(0)
				err := l.Read(from, to, func(txn *logstorepb.Transaction) (bool, error) {
					if types.LSN(txn.Lsn) != from+count {
						return false, fmt.Errorf("range from %d: got lsn %d at %d", from, txn.Lsn, count)
					}
					count++
					return true, check(txn)
				})
				if err != nil && !retentionRace(err) {
					fail(err)
					return
				}
				if txn, err := l.Get(from); err == nil {
					if err := check(txn); err != nil {
						fail(err)
						return
					}
				} else if !retentionRace(err) {
					fail(fmt.Errorf("Get(%d): %w", from, err))
					return
				}
				topic := "orders"
				offs := oracle[topic]
				off := rng.IntN(int(min(types.LSN(len(offs)), 2*last)))
				lsn, err := l.TopicOffsetLSN(topic, types.Offset(off))
				switch {
				case retentionRace(err), errors.Is(err, ErrNotFound) && offs[off] > last:
				case err != nil:
					fail(fmt.Errorf("TopicOffsetLSN(%s, %d): %w", topic, off, err))
					return
				case lsn != offs[off]:
					fail(fmt.Errorf("TopicOffsetLSN(%s, %d) = %d, want %d", topic, off, lsn, offs[off]))
					return
				}
			}
		})
	}
	// Retention and checkpoints on their own goroutine, as a snapshot and a
	// retention loop would run, every maintenanceEvery appends.
	const maintenanceEvery = 150
	progress := make(chan types.LSN, n/maintenanceEvery+1) // never blocks the writer
	wg.Go(func() {
		i := 0
		for last := range progress {
			i++
			if i%2 == 0 {
				if last > 1000 {
					n, err := l.DeleteBefore(last - 1000)
					if err != nil {
						fail(err)
						return
					}
					freed.Add(n)
				}
				continue
			}
			cp := filepath.Join(t.TempDir(), "cp")
			m, err := l.Checkpoint(cp, last)
			if err != nil {
				fail(fmt.Errorf("Checkpoint(%d): %w", last, err))
				return
			}
			if err := m.Verify(cp); err != nil {
				fail(err)
				return
			}
			checkpoints.Add(1)
		}
	})

	for _, txn := range want {
		if err := l.Append(txn); err != nil {
			t.Fatal(err)
		}
		if txn.Lsn%maintenanceEvery == 0 {
			progress <- types.LSN(txn.Lsn)
		}
	}
	close(progress)
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if freed.Load() == 0 || checkpoints.Load() == 0 {
		t.Fatalf("retention freed %d bytes and %d checkpoints were made: the test did not race them", freed.Load(), checkpoints.Load())
	}
}
