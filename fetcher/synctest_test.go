package fetcher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/fetcher"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The fetcher's timers on a fake clock (testing/synctest): the main
// stream's stall watchdog and the reconnect backoff. The nodes are
// in-memory fakes (memNode), since a bubble cannot do network I/O.

// memNode is a LogStore node holding LSNs 1..head of a log. Its Read
// streams send one transaction per response while they can, then wait
// for the head to grow or their context to end. Only Read and Status are
// implemented.
type memNode struct {
	logstorepb.LogStoreClient // nil: the fetcher calls nothing else here

	mu struct {
		sync.Mutex
		head    uint64
		serveTo uint64 // streams send nothing above it (a node cut off from commits); 0: head
		down    bool   // Read and Status fail with Unavailable
		role    string
		term    uint64
		changed chan struct{} // closed and replaced when head or serveTo change
		reads   []time.Time   // when each Read call came
		ends    []time.Time   // when each stream ended (its context, or down)
	}
}

func newMemNode(head uint64, role string, term uint64) *memNode {
	n := &memNode{}
	n.mu.head, n.mu.role, n.mu.term, n.mu.changed = head, role, term, make(chan struct{})
	return n
}

func (n *memNode) update(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
	close(n.mu.changed)
	n.mu.changed = make(chan struct{})
}

func (n *memNode) Status(context.Context, *logstorepb.StatusRequest, ...grpc.CallOption) (*logstorepb.StatusResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.down {
		return nil, status.Error(codes.Unavailable, "down")
	}
	return &logstorepb.StatusResponse{HeadLsn: n.mu.head, Role: n.mu.role, RaftTerm: n.mu.term}, nil
}

func (n *memNode) Read(ctx context.Context, req *logstorepb.ReadRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[logstorepb.ReadResponse], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.reads = append(n.mu.reads, time.Now())
	if n.mu.down {
		return nil, status.Error(codes.Unavailable, "down")
	}
	return &memStream{n: n, ctx: ctx, next: req.FromLsn}, nil
}

func (n *memNode) times() (reads, ends []time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]time.Time(nil), n.mu.reads...), append([]time.Time(nil), n.mu.ends...)
}

type memStream struct {
	grpc.ClientStream // nil: only Recv is called
	n                 *memNode
	ctx               context.Context
	next              uint64
}

func (s *memStream) Recv() (*logstorepb.ReadResponse, error) {
	for {
		s.n.mu.Lock()
		limit := s.n.mu.head
		if s.n.mu.serveTo > 0 {
			limit = min(limit, s.n.mu.serveTo)
		}
		if s.next <= limit {
			txn := &logstorepb.Transaction{Lsn: s.next, RaftIndex: s.next}
			s.next++
			s.n.mu.Unlock()
			return &logstorepb.ReadResponse{Transactions: []*logstorepb.Transaction{txn}, ReadThroughLsn: txn.Lsn}, nil
		}
		if s.n.mu.down {
			s.n.mu.ends = append(s.n.mu.ends, time.Now())
			s.n.mu.Unlock()
			return nil, status.Error(codes.Unavailable, "down")
		}
		changed := s.n.mu.changed
		s.n.mu.Unlock()
		select {
		case <-s.ctx.Done():
			s.n.mu.Lock()
			s.n.mu.ends = append(s.n.mu.ends, time.Now())
			s.n.mu.Unlock()
			return nil, status.FromContextError(s.ctx.Err()).Err()
		case <-changed:
		}
	}
}

// delivered is one transaction the handler got, and when.
type delivered struct {
	lsn uint64
	at  time.Time
}

// follow runs Follow from lsn 1 over nodes until the test ends, sending
// every transaction to the returned channel.
func follow(t *testing.T, cfg fetcher.Config) <-chan delivered {
	t.Helper()
	f, err := fetcher.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan delivered, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := f.Follow(ctx, 1, func(txn *logstorepb.Transaction) error {
			out <- delivered{txn.Lsn, time.Now()}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Follow: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// next returns the next delivery, failing after a minute of fake time.
func next(t *testing.T, ch <-chan delivered) delivered {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(time.Minute):
		t.Fatal("nothing delivered for a minute")
		return delivered{}
	}
}

func stalls(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return testmetric.Value(t, reg, "logplayer_fetcher_main_stalls_total", nil)
}

// A main stream silent for StallTimeout while another node holds the next
// LSN is abandoned at the first watchdog check (every StallTimeout/2) at or
// after StallTimeout, and the fetcher resumes on the node that is ahead.
func TestStallWatchdogTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cut := newMemNode(3, "leader", 1) // cut off after lsn 1, still claims to lead
		cut.mu.serveTo = 1
		live := newMemNode(3, "follower", 1)
		go func() { // live is elected while cut is silent
			time.Sleep(700 * time.Millisecond)
			live.update(func() { live.mu.role, live.mu.term = "leader", 2 })
		}()
		reg := prometheus.NewRegistry()
		ch := follow(t, fetcher.Config{Nodes: []logstorepb.LogStoreClient{cut, live}, StallTimeout: time.Second,
			RetryInitial: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, Registerer: reg})
		if d := next(t, ch); d.lsn != 1 || d.at != start {
			t.Fatalf("first delivery %d at %v, want lsn 1 at once", d.lsn, d.at.Sub(start))
		}
		d2, d3 := next(t, ch), next(t, ch)
		_, ends := cut.times()
		if len(ends) != 1 || ends[0].Sub(start) != time.Second {
			t.Fatalf("stalled stream ended at %v, want once, at StallTimeout (1s)", ends)
		}
		// Reconnect after one backoff (10ms ± 50%).
		if wait := d2.at.Sub(ends[0]); d2.lsn != 2 || d3.lsn != 3 || wait < 5*time.Millisecond || wait > 15*time.Millisecond {
			t.Fatalf("lsns %d, %d, %v after the stall; want 2 and 3 after 5-15ms", d2.lsn, d3.lsn, wait)
		}
		if reads, _ := live.times(); len(reads) != 1 {
			t.Fatalf("%d reads on the live node, want 1", len(reads))
		}
		if v := stalls(t, reg); v != 1 {
			t.Fatalf("stalls = %v, want 1", v)
		}
	})
}

// A stream that is slow but alive (a commit every 0.9 × StallTimeout) is
// never abandoned, even with another node ahead; once it goes silent it
// is, at the first check at least StallTimeout after its last response.
func TestStallWatchdogSparesSlowStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slow := newMemNode(1, "leader", 1)
		ahead := newMemNode(100, "follower", 1)
		go func() {
			for lsn := uint64(2); lsn <= 12; lsn++ {
				time.Sleep(900 * time.Millisecond)
				slow.update(func() { slow.mu.head = lsn })
			}
			// slow is cut off from here on; ahead is elected.
			ahead.update(func() { ahead.mu.role, ahead.mu.term = "leader", 2 })
		}()
		reg := prometheus.NewRegistry()
		ch := follow(t, fetcher.Config{Nodes: []logstorepb.LogStoreClient{slow, ahead}, StallTimeout: time.Second,
			RetryInitial: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, Registerer: reg})
		for lsn := uint64(1); lsn <= 12; lsn++ {
			d := next(t, ch)
			if want := time.Duration(lsn-1) * 900 * time.Millisecond; d.lsn != lsn || d.at.Sub(start) != want {
				t.Fatalf("delivery %d at %v, want %d at %v", d.lsn, d.at.Sub(start), lsn, want)
			}
		}
		if v := stalls(t, reg); v != 0 {
			t.Fatalf("a live stream stalled %v times", v)
		}
		// Last response at 9.9s; checks at 10.0s (0.1s silent), 10.5s
		// (0.6s), 11.0s (1.1s): abandoned then.
		if d := next(t, ch); d.lsn != 13 {
			t.Fatalf("delivered %d after the stall, want 13 from the node ahead", d.lsn)
		}
		_, ends := slow.times()
		if len(ends) != 1 || ends[0].Sub(start) != 11*time.Second {
			t.Fatalf("slow stream ended at %v, want once, at 11s", ends)
		}
		if v := stalls(t, reg); v != 1 {
			t.Fatalf("stalls = %v, want 1", v)
		}
	})
}

// With every node down the reconnects back off exponentially from
// RetryInitial up to RetryMax (each wait ±50%, the library's jitter), and
// a stream that delivers something resets the backoff.
func TestFollowBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := []*memNode{newMemNode(1, "follower", 1), newMemNode(1, "follower", 1)}
		for _, n := range nodes {
			n.mu.down = true
		}
		const initial, maxWait = 100 * time.Millisecond, time.Second
		ch := follow(t, fetcher.Config{Nodes: []logstorepb.LogStoreClient{nodes[0], nodes[1]},
			RetryInitial: initial, RetryMax: maxWait})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		attempts := func() []time.Time {
			var all []time.Time
			r0, _ := nodes[0].times()
			r1, _ := nodes[1].times()
			for i := range r0 { // the fetcher alternates, node 0 first
				all = append(all, r0[i])
				if i < len(r1) {
					all = append(all, r1[i])
				}
			}
			return all
		}
		all := attempts()
		// Waits 100ms × 1.5^k, capped at 1s, each within ±50%: 30s hold
		// about 38 attempts; a missing backoff would make thousands.
		if len(all) < 25 || len(all) > 60 {
			t.Fatalf("%d attempts in 30s, want about 38", len(all))
		}
		want := initial
		for i := 1; i < len(all); i++ {
			gap := all[i].Sub(all[i-1])
			if gap < want/2 || gap > want*3/2 {
				t.Fatalf("wait %d is %v, want %v ± 50%%", i, gap, want)
			}
			want = min(want*3/2, maxWait)
		}
		// Node 0 comes back with lsn 1, which is delivered on the next
		// attempt; when it fails again the next wait is RetryInitial's again.
		nodes[0].update(func() { nodes[0].mu.down = false })
		if d := next(t, ch); d.lsn != 1 {
			t.Fatalf("delivered lsn %d, want 1", d.lsn)
		}
		nodes[0].update(func() { nodes[0].mu.down = true })
		synctest.Wait()
		_, ends := nodes[0].times()
		if len(ends) != 1 {
			t.Fatalf("node 0's stream ended %d times, want 1", len(ends))
		}
		time.Sleep(2 * time.Second)
		r1, _ := nodes[1].times()
		var after []time.Time
		for _, r := range r1 {
			if r.After(ends[0]) {
				after = append(after, r)
			}
		}
		if len(after) == 0 {
			t.Fatal("no reconnect after the stream broke")
		}
		if gap := after[0].Sub(ends[0]); gap < initial/2 || gap > initial*3/2 {
			t.Fatalf("first wait after a stream that delivered: %v, want %v ± 50%% (reset)", gap, initial)
		}
	})
}
