package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// fakeRaft records the entries the Aggregator applies; the test resolves
// each one when it likes.
type fakeRaft struct {
	applied chan *fakeFuture
	mu      sync.Mutex
	all     []*fakeFuture
}

type fakeFuture struct {
	entry *logstorepb.Entry
	data  []byte // what Apply was given
	done  chan struct{}
	once  sync.Once
	resp  []fsm.Result
}

func holdFor(d time.Duration) func(*convoy) time.Duration {
	return func(*convoy) time.Duration { return d }
}

// resolveAll resolves every entry (so the Aggregator can stop after a
// failed test).
func (r *fakeRaft) resolveAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.all {
		f.resolve()
	}
}

func (f *fakeFuture) Error() error  { <-f.done; return nil }
func (f *fakeFuture) Index() uint64 { return 0 }
func (f *fakeFuture) Response() any { <-f.done; return f.resp }

// resolve answers every command of the entry with an AppendResponse whose
// LSN is the command's position.
func (f *fakeFuture) resolve() {
	f.once.Do(func() {
		for i := range f.entry.Commands {
			f.resp = append(f.resp, fsm.Result{Resp: &logstorepb.AppendResponse{Lsn: uint64(i + 1)}})
		}
		close(f.done)
	})
}

func (r *fakeRaft) Apply(data []byte, _ time.Duration) raft.ApplyFuture {
	e := &logstorepb.Entry{}
	if err := proto.Unmarshal(data, e); err != nil {
		panic(err)
	}
	f := &fakeFuture{entry: e, data: data, done: make(chan struct{})}
	r.mu.Lock()
	r.all = append(r.all, f)
	r.mu.Unlock()
	r.applied <- f
	return f
}

// next waits for the next applied entry.
func (r *fakeRaft) next(t *testing.T) *fakeFuture {
	t.Helper()
	select {
	case f := <-r.applied:
		return f
	case <-time.After(30 * time.Second):
		t.Fatal("no entry applied within 30s")
		return nil
	}
}

// testAggregator starts an Aggregator on a fakeRaft; tune changes its
// settings before it starts.
func testAggregator(t *testing.T, tune func(a *Aggregator)) (*Aggregator, *fakeRaft) {
	t.Helper()
	return testAggregatorConfig(t, nil, tune)
}

// testAggregatorConfig is testAggregator with configure changing the
// AggregatorConfig before the Aggregator is built.
func testAggregatorConfig(t *testing.T, configure func(*AggregatorConfig), tune func(a *Aggregator)) (*Aggregator, *fakeRaft) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry(), "t")
	if err != nil {
		t.Fatal(err)
	}
	// logstore.Config's defaults (logstore/config.go).
	cfg := AggregatorConfig{Now: time.Now, IntakeQueue: 8192, IntakeQueueBytes: 256 << 20,
		MaxBatchTxns: 1024, MaxBatchBytes: 1 << 20, PipelineMinTxns: 64, MaxInflightEntries: 4,
		RaftTimeout: 10 * time.Second, Limits: &logstorepb.ApplyLimits{}}
	if configure != nil {
		configure(&cfg)
	}
	r := &fakeRaft{applied: make(chan *fakeFuture, 64)}
	a := buildAggregator(r, cfg, m)
	if tune != nil {
		tune(a)
	}
	a.start()
	t.Cleanup(a.Close)
	t.Cleanup(r.resolveAll) // runs first
	return a, r
}

type submitted struct {
	resp proto.Message
	err  error
}

// submitAsync submits an Append naming id (as its producer id, to tell
// commands apart) and returns where its result arrives.
func submitAsync(a *Aggregator, id string) <-chan submitted {
	out := make(chan submitted, 1)
	cmd := &logstorepb.Command{Kind: &logstorepb.Command_Append{Append: &logstorepb.AppendRequest{ProducerId: id}}}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := a.Submit(ctx, cmd, proto.Size(cmd))
		out <- submitted{resp, err}
	}()
	return out
}

func wait(t *testing.T, ch <-chan submitted) submitted {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no result within 30s")
		return submitted{}
	}
}

func ids(f *fakeFuture) []string {
	var out []string
	for _, c := range f.entry.Commands {
		out = append(out, c.GetAppend().ProducerId)
	}
	return out
}

// A lone request goes out at once, with nothing in flight, even when the
// hold window is an hour: a serial client never waits for a linger.
func TestAggregatorSerialNeverHolds(t *testing.T) {
	a, r := testAggregator(t, func(a *Aggregator) { a.holdWindow = holdFor(time.Hour) })
	for i := range 5 {
		res := submitAsync(a, fmt.Sprint("c", i))
		f := r.next(t)
		if got := ids(f); len(got) != 1 {
			t.Fatalf("round %d: entry %v, want one command", i, got)
		}
		f.resolve()
		if s := wait(t, res); s.err != nil || s.resp.(*logstorepb.AppendResponse).Lsn != 1 {
			t.Fatalf("round %d: %+v", i, s)
		}
	}
}

// After an entry resolves with nothing in flight, the batch waits for what
// it held plus the requests that entry answered (the convoy), so two groups
// of clients merge into one entry instead of alternating.
func TestAggregatorConvoyMerges(t *testing.T) {
	a, r := testAggregator(t, func(a *Aggregator) { a.holdWindow = holdFor(time.Hour) })
	resA := submitAsync(a, "a")
	e1 := r.next(t)
	if got := ids(e1); len(got) != 1 || got[0] != "a" {
		t.Fatalf("entry 1 %v, want [a]", got)
	}
	// b, c, d arrive while entry 1 is in flight: they wait for it.
	var res []<-chan submitted
	for _, id := range []string{"b", "c", "d"} {
		res = append(res, submitAsync(a, id))
	}
	testwait.For(t, testwait.Max, "b, c and d taken into the batch", func() bool { return intakeTaken(a, 4) })
	e1.resolve()
	if s := wait(t, resA); s.err != nil {
		t.Fatal(s.err)
	}
	// Entry 1 answered a: the three wait (the hold is an hour) until a is
	// back, and all four ride entry 2.
	res = append(res, submitAsync(a, "a"))
	e2 := r.next(t)
	if got := ids(e2); len(got) != 4 || got[3] != "a" {
		t.Fatalf("entry 2 %v, want [b c d a] in one entry", got)
	}
	e2.resolve()
	for _, ch := range res {
		if s := wait(t, ch); s.err != nil {
			t.Fatal(s.err)
		}
	}
}

// The hold window follows how long answered clients take to come back, and
// is none when they take a commit or longer (or have not been timed yet).
func TestConvoyHoldWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var c convoy
	c.resolved(3, 4*time.Millisecond, t0)
	if w := defaultHoldWindow(&c); w != 0 {
		t.Fatalf("window %v before any return was timed, want 0", w)
	}
	c.arrived(2, t0.Add(time.Millisecond))
	c.arrived(1, t0.Add(2*time.Millisecond)) // all three back after 2ms
	if c.back != 2*time.Millisecond {
		t.Fatalf("return time %v, want 2ms", c.back)
	}
	if w := defaultHoldWindow(&c); w != 3*time.Millisecond {
		t.Fatalf("window %v, want 1.5 × 2ms", w)
	}
	// Slow commits do not stretch the window past maxHold.
	c.back, c.commit = time.Second, 2*time.Second
	if w := defaultHoldWindow(&c); w != maxHold {
		t.Fatalf("window %v, want maxHold", w)
	}
	// A convoy that takes longer than a commit to come back is not held for.
	c.back, c.commit = 5*time.Millisecond, 4*time.Millisecond
	if w := defaultHoldWindow(&c); w != 0 {
		t.Fatalf("window %v for returns slower than commits, want 0", w)
	}
	// A HoldReturnRatio above 1 holds for returns slower than a commit, up
	// to that many commits.
	if w := holdWindow(&c, 3); w != 7500*time.Microsecond {
		t.Fatalf("window %v at ratio 3, want 1.5 × 5ms", w)
	}
	c.back = 12 * time.Millisecond
	if w := holdWindow(&c, 3); w != 0 {
		t.Fatalf("window %v at ratio 3 for returns of 3 commits, want 0", w)
	}
	// A return still short when the next entry resolves counts as that long.
	c = convoy{}
	c.resolved(5, 4*time.Millisecond, t0)
	c.arrived(1, t0.Add(time.Millisecond))
	c.resolved(1, 4*time.Millisecond, t0.Add(6*time.Millisecond))
	if c.back != 6*time.Millisecond || defaultHoldWindow(&c) != 0 {
		t.Fatalf("censored return: back %v window %v, want 6ms and none", c.back, defaultHoldWindow(&c))
	}
}

// intakeTaken reports whether the Aggregator has taken at least n requests
// out of intake since it started (the batch metric is not enough: nothing
// is sent yet).
func intakeTaken(a *Aggregator, n int) bool {
	return a.taken.Load() >= int64(n)
}

// When the clients an entry answered do not come back, the batch waits at
// most the hold window.
func TestAggregatorHoldExpires(t *testing.T) {
	a, r := testAggregator(t, func(a *Aggregator) { a.holdWindow = holdFor(time.Millisecond) })
	var res []<-chan submitted
	for _, id := range []string{"a", "b", "c"} {
		res = append(res, submitAsync(a, id))
	}
	testwait.For(t, testwait.Max, "three requests taken", func() bool { return intakeTaken(a, 3) })
	e1 := r.next(t) // a alone, or more: whatever was there when it went
	var all []string
	all = append(all, ids(e1)...)
	e1.resolve()
	for len(all) < 3 {
		e := r.next(t)
		all = append(all, ids(e)...)
		e.resolve()
	}
	for _, ch := range res {
		if s := wait(t, ch); s.err != nil {
			t.Fatal(s.err)
		}
	}
	// Three were answered; one comes back alone and still goes out.
	last := submitAsync(a, "z")
	e := r.next(t)
	if got := ids(e); len(got) != 1 || got[0] != "z" {
		t.Fatalf("entry %v, want [z] after the hold window", got)
	}
	e.resolve()
	wait(t, last)
}

// With an entry in flight a batch of PipelineMinTxns goes out before the
// entry resolves, up to MaxInflightEntries entries.
func TestAggregatorPipelines(t *testing.T) {
	a, r := testAggregator(t, func(a *Aggregator) { a.pipeTxns, a.maxInflight, a.holdWindow = 2, 2, holdFor(time.Hour) })
	res := []<-chan submitted{submitAsync(a, "a")}
	e1 := r.next(t)
	res = append(res, submitAsync(a, "b"), submitAsync(a, "c"))
	e2 := r.next(t) // while e1 is unresolved
	if got := ids(e2); len(got) != 2 {
		t.Fatalf("entry 2 %v, want b and c", got)
	}
	// Two in flight: d and e wait for a resolution even as a full pipeline batch.
	res = append(res, submitAsync(a, "d"), submitAsync(a, "e"))
	testwait.For(t, testwait.Max, "d and e taken", func() bool { return intakeTaken(a, 5) })
	e1.resolve()
	e3 := r.next(t)
	if got := ids(e3); len(got) != 2 {
		t.Fatalf("entry 3 %v, want d and e", got)
	}
	e2.resolve()
	e3.resolve()
	for _, ch := range res {
		if s := wait(t, ch); s.err != nil {
			t.Fatal(s.err)
		}
	}
}

// A full intake answers QUEUE_FULL at once; the queued requests still
// complete.
func TestAggregatorQueueFull(t *testing.T) {
	a, r := testAggregator(t, func(a *Aggregator) {
		a.maxTxns, a.maxInflight = 1, 1
		a.intake = make(chan *pending, 1)
	})
	res := []<-chan submitted{submitAsync(a, "a")}
	e1 := r.next(t)
	res = append(res, submitAsync(a, "b")) // the batch (full: one command)
	testwait.For(t, testwait.Max, "b taken into the batch", func() bool { return intakeTaken(a, 2) })
	res = append(res, submitAsync(a, "c")) // intake's one slot
	testwait.For(t, testwait.Max, "c queued", func() bool { return len(a.intake) == 1 })
	if s := wait(t, submitAsync(a, "d")); !errors.Is(s.err, apierr.ErrQueueFull) {
		t.Fatalf("d: %v, want ErrQueueFull", s.err)
	}
	e1.resolve()
	for i := 0; i < 2; i++ {
		r.next(t).resolve()
	}
	for _, ch := range res {
		if s := wait(t, ch); s.err != nil {
			t.Fatal(s.err)
		}
	}
}

// TestAggregatorCloseAbandonsUnresolvedFutures: a future Raft never
// resolves (hashicorp/raft drops futures left in its buffered apply channel
// at shutdown) does not hang close; its requests learn that their outcome
// is unknown.
func TestAggregatorCloseAbandonsUnresolvedFutures(t *testing.T) {
	a, r := testAggregator(t, nil)
	res := submitAsync(a, "stuck")
	r.next(t) // applied, never resolved
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("close hangs on a future Raft never resolves")
	}
	if s := wait(t, res); !errors.Is(s.err, apierr.ErrUnknownOutcome) {
		t.Fatalf("abandoned request: %v, want an unknown outcome", s.err)
	}
}

// TestAggregatorSentHoldsEntriesInFlight: an entry is in Sent, as the
// Entry its bytes encode, from before Raft has it until its future
// resolves, then gone whether or not the FSM took it.
func TestAggregatorSentHoldsEntriesInFlight(t *testing.T) {
	sent := NewSent()
	a, r := testAggregator(t, func(a *Aggregator) { a.sent = sent })
	res := submitAsync(a, "one")
	f := r.next(t)
	sent.mu.Lock()
	held := sent.m[&f.data[0]].e
	sent.mu.Unlock()
	if !proto.Equal(held, f.entry) {
		t.Fatalf("Sent holds %v, the bytes are %v", held, f.entry)
	}
	f.resolve() // the fake Raft's FSM took nothing
	if s := wait(t, res); s.err != nil {
		t.Fatal(s.err)
	}
	testwait.For(t, testwait.Max, "the entry dropped", func() bool {
		sent.mu.Lock()
		defer sent.mu.Unlock()
		return len(sent.m) == 0
	})
}

// TestAggregatorCloseAnswersResolvedFutures: at Close, an entry whose
// future has resolved is answered with its result, not as an unknown
// outcome, even behind an entry Raft never resolves; the stuck one alone
// is unknown.
func TestAggregatorCloseAnswersResolvedFutures(t *testing.T) {
	a, r := testAggregatorConfig(t, func(c *AggregatorConfig) { c.PipelineMinTxns = 1 }, nil)
	stuck := submitAsync(a, "stuck")
	r.next(t) // applied, never resolved
	done := submitAsync(a, "done")
	r.next(t).resolve() // behind the stuck one: complete has not taken it
	a.Close()
	if s := wait(t, done); s.err != nil {
		t.Fatalf("resolved entry at Close: %v, want its result", s.err)
	}
	if s := wait(t, stuck); !errors.Is(s.err, apierr.ErrUnknownOutcome) {
		t.Fatalf("unresolved entry at Close: %v, want an unknown outcome", s.err)
	}
}

// defaultHoldWindow is holdWindow at DefaultHoldReturnRatio.
func defaultHoldWindow(c *convoy) time.Duration { return holdWindow(c, DefaultHoldReturnRatio) }
