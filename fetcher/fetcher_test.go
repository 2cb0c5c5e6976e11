package fetcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/fetcher/fetchertest"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// cluster is a fake LogStore of n nodes and a Fetcher over them.
type cluster struct {
	store *fetchertest.Store
	nodes []*fetchertest.Node
	f     *Fetcher
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{store: fetchertest.New()}
	var clients []logstorepb.LogStoreClient
	for range n {
		node, err := c.store.StartNode()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Stop)
		c.nodes = append(c.nodes, node)
		cc, err := grpc.NewClient(node.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		clients = append(clients, logstorepb.NewLogStoreClient(cc))
	}
	f, err := New(Config{Nodes: clients, RetryInitial: time.Millisecond, RetryMax: 20 * time.Millisecond, MaxBatch: 7})
	if err != nil {
		t.Fatal(err)
	}
	c.f = f
	return c
}

func slice(topic string, values ...string) *logstorepb.Slice {
	s := &logstorepb.Slice{Topic: topic}
	for _, v := range values {
		s.Messages = append(s.Messages, &logstorepb.Message{Value: []byte(v)})
	}
	return s
}

// The main stream hands out every LSN exactly once and in order while nodes
// break their streams and stop one after another under load.
func TestFollowSurvivesNodeFailures(t *testing.T) {
	c := newCluster(t, 3)
	const total = 3000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var got []uint64
	done := make(chan error, 1)
	go func() {
		done <- c.f.Follow(ctx, 1, func(txn *logstorepb.Transaction) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, txn.Lsn)
			if len(got) == total {
				return errDone
			}
			return nil
		})
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	reads := func() (n int64) {
		for _, node := range c.nodes {
			n += node.Reads()
		}
		return n
	}
	breaks := 0
	for i := 1; i <= total; i++ {
		c.store.Append(slice("a", fmt.Sprint(i)))
		switch i {
		case 500, 900, 1300:
			// Break whichever node serves the stream right now, once the
			// previous break has been followed by a new stream.
			testwait.For(t, 10*time.Second, "a live stream", func() bool {
				return reads() == 1 && counterValue(t, c.f.metrics.reconnects.WithLabelValues("main")) == float64(breaks)
			})
			for _, n := range c.nodes {
				n.BreakStreams()
			}
			breaks++
		case 2000:
			testwait.For(t, 10*time.Second, "some progress", func() bool { return count() >= 1600 })
			c.nodes[0].Stop()
			c.nodes[1].Stop()
		}
	}
	if err := <-done; !errors.Is(err, errDone) {
		t.Fatalf("Follow returned %v, want the handler's error", err)
	}
	for i, lsn := range got {
		if lsn != uint64(i+1) {
			t.Fatalf("position %d holds lsn %d", i, lsn)
		}
	}
	if r := counterValue(t, c.f.metrics.reconnects.WithLabelValues("main")); r < 3 {
		t.Fatalf("reconnects = %v, want >= 3 (streams were broken three times)", r)
	}
}

var errDone = errors.New("done")

// A recovery stream returns only the wanted topics in (after, to] and ends
// at to even when the last transactions do not match the filter, also across
// a broken stream.
func TestReadRangeFiltersAndEnds(t *testing.T) {
	c := newCluster(t, 2)
	var want []uint64
	for i := 1; i <= 100; i++ {
		switch {
		case i%3 == 0:
			c.store.Append(slice("a", "x"), slice("b", "y"))
			if i > 10 && i <= 90 {
				want = append(want, uint64(i))
			}
		default:
			c.store.Append(slice("b", "y"))
		}
	}
	var got []uint64
	err := c.f.ReadRange(context.Background(), 10, 90, []string{"a"}, func(txn *logstorepb.Transaction) error {
		if len(txn.Slices) != 1 || txn.Slices[0].Topic != "a" {
			t.Errorf("lsn %d: slices %v, want only topic a", txn.Lsn, txn.Slices)
		}
		got = append(got, txn.Lsn)
		if len(got) == 5 {
			c.nodes[0].BreakStreams()
			c.nodes[1].BreakStreams()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// An empty range returns at once; a range whose tail matches nothing ends.
	if err := c.f.ReadRange(context.Background(), 90, 90, []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.f.ReadRange(context.Background(), 97, 100, []string{"zzz"}, func(*logstorepb.Transaction) error {
		return errors.New("nothing matches zzz")
	}); err != nil {
		t.Fatal(err)
	}
}

// A recovery stream waits for a range end beyond the head.
func TestReadRangeWaitsForHead(t *testing.T) {
	c := newCluster(t, 1)
	c.store.Append(slice("a", "1"))
	done := make(chan error, 1)
	var got []uint64
	go func() {
		done <- c.f.ReadRange(context.Background(), 0, 3, nil, func(txn *logstorepb.Transaction) error {
			got = append(got, txn.Lsn)
			return nil
		})
	}()
	c.store.Append(slice("a", "2"))
	c.store.Append(slice("a", "3"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("got %v", got)
	}
}

func TestBelowRetention(t *testing.T) {
	c := newCluster(t, 2)
	for range 20 {
		c.store.Append(slice("a", "x"))
	}
	c.store.Truncate(11)
	err := c.f.ReadRange(context.Background(), 4, 15, nil, func(*logstorepb.Transaction) error { return nil })
	var br *BelowRetentionError
	if !errors.As(err, &br) || !errors.Is(err, ErrBelowRetention) || br.From != 5 || br.Oldest != 11 {
		t.Fatalf("err = %v, want BelowRetentionError{From 5, Oldest 11}", err)
	}
	err = c.f.Follow(context.Background(), 3, func(*logstorepb.Transaction) error { return nil })
	if !errors.As(err, &br) || br.From != 3 {
		t.Fatalf("Follow: err = %v, want BelowRetentionError{From 3}", err)
	}
	if v := counterValue(t, c.f.metrics.belowRetention.WithLabelValues("recovery")); v != 1 {
		t.Fatalf("below retention counter = %v", v)
	}
	// From the oldest retained LSN on, reads work.
	n := 0
	if err := c.f.ReadRange(context.Background(), 10, 20, nil, func(*logstorepb.Transaction) error { n++; return nil }); err != nil || n != 10 {
		t.Fatalf("ReadRange(10, 20] = %d txns, %v", n, err)
	}
}

func TestFollowStopsOnContext(t *testing.T) {
	c := newCluster(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	c.store.Append(slice("a", "x"))
	err := c.f.Follow(ctx, 1, func(*logstorepb.Transaction) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// With every node down the stream keeps retrying until ctx ends.
	c.nodes[0].Stop()
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := c.f.Follow(ctx, 2, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

func TestUnaryFailsOver(t *testing.T) {
	c := newCluster(t, 3)
	c.nodes[0].Stop()
	c.nodes[1].Stop()
	ctx := context.Background()
	e1, err := c.f.NextEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := c.f.NextEpoch(ctx)
	if err != nil || e2 <= e1 {
		t.Fatalf("epochs %d then %d (%v), want increasing", e1, e2, err)
	}
	if err := c.f.ReportConsumer(ctx, "logplayer/a", 42, false); err != nil {
		t.Fatal(err)
	}
	if got := c.store.Consumers()["logplayer/a"]; got != 42 {
		t.Fatalf("consumer = %d", got)
	}
	if err := c.f.ReportConsumer(ctx, "logplayer/a", 0, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.store.Consumers()["logplayer/a"]; ok {
		t.Fatal("consumer not removed")
	}
	// A request the LogStore refuses is not retried.
	if err := c.f.ReportConsumer(ctx, "", 1, false); err == nil {
		t.Fatal("empty consumer accepted")
	}
	st, err := c.f.Status(ctx)
	if err != nil || st.HeadLsn != 0 || st.FirstLsn != 1 {
		t.Fatalf("status %v, %v", st, err)
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrNoNodes) {
		t.Fatalf("no nodes: %v", err)
	}
	if _, err := New(Config{Nodes: []logstorepb.LogStoreClient{nil}}); err == nil {
		t.Fatal("nil node accepted")
	}
	c := newCluster(t, 1)
	if _, err := New(Config{Nodes: c.f.cfg.Nodes, RetryInitial: time.Second, RetryMax: time.Millisecond}); err == nil {
		t.Fatal("retry max below initial accepted")
	}
	if err := c.f.Follow(context.Background(), 0, nil); err == nil {
		t.Fatal("Follow from 0 accepted")
	}
}

// scriptedClient answers Read with canned responses (to feed the fetcher what
// a correct LogStore never sends).
type scriptedClient struct {
	logstorepb.LogStoreClient
	resps []*logstorepb.ReadResponse
}

type scriptedStream struct {
	grpc.ClientStream
	resps []*logstorepb.ReadResponse
}

func (s *scriptedStream) Recv() (*logstorepb.ReadResponse, error) {
	if len(s.resps) == 0 {
		return nil, errors.New("script exhausted")
	}
	r := s.resps[0]
	s.resps = s.resps[1:]
	return r, nil
}

func (c *scriptedClient) Read(context.Context, *logstorepb.ReadRequest, ...grpc.CallOption) (logstorepb.LogStore_ReadClient, error) {
	return &scriptedStream{resps: c.resps}, nil
}

func txns(lsns ...uint64) *logstorepb.ReadResponse {
	r := &logstorepb.ReadResponse{}
	for _, l := range lsns {
		r.Transactions = append(r.Transactions, &logstorepb.Transaction{Lsn: l})
		r.ReadThroughLsn = l
	}
	return r
}

// A gap or a repeat on the main stream is a LogStore bug: the fetcher panics
// with the numbers rather than deliver out of order.
func TestContinuityViolationsPanic(t *testing.T) {
	cases := []struct {
		name  string
		resps []*logstorepb.ReadResponse
		want  string
		read  func(f *Fetcher) error
	}{
		{"gap", []*logstorepb.ReadResponse{txns(5, 6, 8)}, "want lsn 7, got 8", nil},
		{"repeat", []*logstorepb.ReadResponse{txns(5, 6), txns(6)}, "want lsn 7, got 6", nil},
		{"skipped", []*logstorepb.ReadResponse{{ReadThroughLsn: 9}}, "read through 9", nil},
		{"recovery backwards", []*logstorepb.ReadResponse{txns(7, 6)}, "got lsn 6", func(f *Fetcher) error {
			return f.ReadRange(context.Background(), 4, 9, []string{"a"}, func(*logstorepb.Transaction) error { return nil })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(Config{Nodes: []logstorepb.LogStoreClient{&scriptedClient{resps: tc.resps}}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("panic %v, want one mentioning %q", r, tc.want)
				}
			}()
			if tc.read != nil {
				_ = tc.read(f)
			} else {
				_ = f.Follow(context.Background(), 5, func(*logstorepb.Transaction) error { return nil })
			}
		})
	}
}

// The main stream reads from the node that says it is the Raft leader (it
// sees commits first).
func TestFollowPrefersLeader(t *testing.T) {
	c := newCluster(t, 3)
	c.nodes[0].SetRole("follower", 1)
	c.nodes[1].SetRole("follower", 1)
	c.store.Append(slice("a", "x"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.f.Follow(ctx, 1, func(*logstorepb.Transaction) error { return nil }) }()
	testwait.For(t, 10*time.Second, "a stream on the leader", func() bool { return c.nodes[2].Reads() == 1 })
	if c.nodes[0].Reads()+c.nodes[1].Reads() != 0 {
		t.Fatal("a follower serves the main stream")
	}
}

// A main stream on a node that stops seeing commits (cut off from the
// leader, its connection still up) moves to a node that is ahead.
func TestFollowLeavesStalledNode(t *testing.T) {
	c := newCluster(t, 2)
	c.f.cfg.StallTimeout = 50 * time.Millisecond
	c.nodes[0].SetRole("leader", 1)
	c.nodes[1].SetRole("follower", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var got []uint64
	go func() {
		_ = c.f.Follow(ctx, 1, func(txn *logstorepb.Transaction) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, txn.Lsn)
			return nil
		})
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	c.store.Append(slice("a", "1"))
	testwait.For(t, 10*time.Second, "lsn 1", func() bool { return count() == 1 })
	// Node 0 is cut off (it still thinks it leads, until its lease ends);
	// node 1 is elected.
	c.nodes[0].Freeze()
	c.nodes[1].SetRole("leader", 2)
	c.store.Append(slice("a", "2"))
	c.store.Append(slice("a", "3"))
	testwait.For(t, 10*time.Second, "lsns 2 and 3 from the other node", func() bool { return count() == 3 })
	if c.nodes[1].Reads() != 1 {
		t.Errorf("stream not on the live node")
	}
	if v := counterValue(t, c.f.metrics.stalls); v < 1 {
		t.Errorf("stalls = %v", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("got %v", got)
	}
}
