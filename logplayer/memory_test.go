package logplayer

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"hash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

var memoryMB = flag.Int("memory-mb", 0, "MB of log traffic in TestMemoryBounded (default 100, 8 under -race; 1024 for the 1 GB run)")

// genTopics are the generated log's topics; LSN n writes to two of them:
// genTopics[n%3] and genTopics[(n+1)%3].
var genTopics = []string{"g0", "g1", "g2"}

// genValueBytes is each generated message's size: a 1 KB transaction.
const genValueBytes = 512

// countMod counts the x in [1, n] with x%3 == r.
func countMod(n, r uint64) uint64 {
	if r == 0 {
		return n / 3
	}
	if n < r {
		return 0
	}
	return (n-r)/3 + 1
}

// genTxn is LSN n of the generated log. Topic i is absent exactly from the
// LSNs with n%3 == (i+1)%3, so its offset at n is the count of earlier LSNs
// where it is present.
func genTxn(n uint64) *logstorepb.Transaction {
	txn := &logstorepb.Transaction{Lsn: n, RaftIndex: n, TimestampUnixNano: int64(n)}
	for _, i := range []uint64{n % 3, (n + 1) % 3} {
		value := make([]byte, genValueBytes)
		binary.BigEndian.PutUint64(value, n)
		value[8] = byte(i)
		txn.Slices = append(txn.Slices, &logstorepb.TxnSlice{
			Topic:       genTopics[i],
			FirstOffset: (n - 1) - countMod(n-1, (i+1)%3),
			Messages:    []*logstorepb.Message{{Value: value}},
		})
	}
	slices.SortFunc(txn.Slices, func(a, b *logstorepb.TxnSlice) int { return int(a.FirstOffset) - int(b.FirstOffset) })
	return txn
}

// hashDelivery adds one applied delivery (its LSN and its slices of topics)
// to h; the same function builds the expected digest from the log.
func hashDelivery(h hash.Hash, lsn uint64, ss []*logstorepb.TxnSlice, topics []string) {
	var b [8]byte
	for _, s := range ss {
		if !slices.Contains(topics, s.Topic) {
			continue
		}
		binary.BigEndian.PutUint64(b[:], lsn)
		h.Write(b[:])
		h.Write([]byte(s.Topic))
		binary.BigEndian.PutUint64(b[:], s.FirstOffset)
		h.Write(b[:])
		for _, m := range s.Messages {
			h.Write(m.Value)
		}
	}
}

// digestStore is a target.Store that keeps no data, only its State and a
// running digest of everything applied: memory-neutral, yet it proves the
// applied sequence equals the log (a duplicate or a gap changes the digest).
type digestStore struct {
	topics []string
	mu     sync.Mutex
	st     target.State
	h      hash.Hash
}

func newDigestStore(topics ...string) *digestStore {
	return &digestStore{topics: topics, h: sha256.New(), st: target.State{Topics: map[string]types.Offset{}}}
}

func (d *digestStore) State() (target.State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st.Clone(), nil
}

func (d *digestStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, dl := range ds {
		hashDelivery(d.h, dl.Lsn, dl.Slices, d.topics)
	}
	d.st = next.Clone()
	return nil
}

func (d *digestStore) digest() (uint64, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return uint64(d.st.AppliedLSN), fmt.Sprintf("%x", d.h.Sum(nil))
}

// heapSampler records the peak HeapInuse while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

// heapSampleEvery is the sampling period (ReadMemStats stops the world
// briefly; 50 Hz costs little).
const heapSampleEvery = 20 * time.Millisecond

func sampleHeap() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(heapSampleEvery)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > s.peak.Load() {
				s.peak.Store(ms.HeapInuse)
			}
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

func (s *heapSampler) halt() uint64 { close(s.stop); <-s.done; return s.peak.Load() }

// One target is down for the whole run while the others receive the whole
// generated log (-memory-mb, default 100 MB): the heap stays under a bound
// derived from the queue and window bounds, not from the traffic; then the
// stopped target returns and catches up from the LogStore, also within the
// bound, and every target's applied sequence equals the log.
func TestMemoryBounded(t *testing.T) {
	const (
		queueBytes  = 2 << 20 // per inner queue
		windowBytes = 2 << 20 // in flight per target
		// fixedSlack covers what does not grow with traffic: the runtime,
		// gRPC transports and their flow-control buffers, a Read response
		// being decoded, the test's own structures.
		fixedSlack = 48 << 20
	)
	trafficMB := *memoryMB
	if trafficMB == 0 {
		trafficMB = 100
		if raceEnabled {
			trafficMB = 8
		}
	}
	txnBytes := uint64(2 * genValueBytes)
	n := uint64(trafficMB) << 20 / txnBytes
	// Waits scale with the traffic: at least 1 MB/s even under -race.
	waitLong := func(what string, cond func() bool) {
		t.Helper()
		testwait.For(t, testwait.Max+time.Duration(trafficMB)*time.Second, what, cond)
	}
	store := newFakeStore(t)
	store.Generate(genTxn)

	var targets []*testTarget
	var stores []*digestStore
	for i, topic := range genTopics {
		ds := newDigestStore(topic)
		tt := newStoreTarget(t, fmt.Sprintf("m%d", i), ds, topic)
		targets, stores = append(targets, tt), append(stores, ds)
	}
	down := targets[2]
	down.stop() // down for the whole run: nothing for it may pile up

	// Per target the player holds at most two full inner queues and one
	// window; a target holds at most what is in flight to it. The Go heap
	// may hold up to twice the live data between collections (GOGC=100).
	live := uint64(len(targets)) * (2*queueBytes + 2*windowBytes)
	bound := 2*live + fixedSlack
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	heap := sampleHeap()
	pr := startPlayer(t, store, targets, func(c *Config) {
		c.Queue = targetqueue.Config{MaxBytes: queueBytes}
		c.WindowBytes = windowBytes
		c.MaxBatchBytes = 512 << 10
		c.HandshakeTimeout = 100 * time.Millisecond // m2 is known to be down
	})
	store.SetHead(n)
	for i := range 2 {
		waitLong(fmt.Sprintf("%s to apply %d", targets[i].id, n), func() bool { lsn, _ := stores[i].digest(); return lsn >= n })
	}
	peakLive := heap.halt()
	testwait.For(t, testwait.Max, "the live targets' acks reported", func() bool {
		c := store.Consumers()
		return c[ConsumerName("m0")] == n && c[ConsumerName("m1")] == n
	})
	if lsn, ok := store.Consumers()[ConsumerName(down.id)]; ok {
		t.Errorf("a target never heard from reported acked LSN %d (it must keep an earlier floor)", lsn)
	}

	heap = sampleHeap()
	down.start()
	waitLong("the returning target to catch up", func() bool { lsn, _ := stores[2].digest(); return lsn >= n })
	peakRecovery := heap.halt()

	for i, ds := range stores {
		h := sha256.New()
		for lsn := uint64(1); lsn <= n; lsn++ {
			hashDelivery(h, lsn, genTxn(lsn).Slices, []string{genTopics[i]})
		}
		if lsn, got := ds.digest(); lsn != n || got != fmt.Sprintf("%x", h.Sum(nil)) {
			t.Errorf("target %d: applied %d, digest %s; want %d and the log's digest", i, lsn, got, n)
		}
		targets[i].checkNoBadRefusals(t)
	}
	if got := testmetric.Value(t, pr.reg, "logplayer_target_recovery_starts_total", map[string]string{"target": down.id}); got < 1 {
		t.Errorf("the returning target recovered %v times", got)
	}
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	t.Logf("traffic %.0f MB (%d txns of %d B); HeapInuse before %.1f MB, peak while one target was down %.1f MB, "+
		"peak while it caught up %.1f MB; bound %.0f MB", mb(n*txnBytes), n, txnBytes, mb(base.HeapInuse), mb(peakLive), mb(peakRecovery), mb(bound))
	for _, p := range []uint64{peakLive, peakRecovery} {
		if p > base.HeapInuse+bound {
			t.Errorf("heap peak %.1f MB above the bound %.1f MB (+%.1f MB before the run)", mb(p), mb(bound), mb(base.HeapInuse))
		}
	}
}
