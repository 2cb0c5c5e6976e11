package logplayer

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/fetcher"
	"github.com/logplayer/logplayer/fetcher/fetchertest"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// fakeStore is an in-memory LogStore of three nodes.
type fakeStore struct {
	*fetchertest.Store
	nodes []*fetchertest.Node
	addrs []string
}

func newFakeStore(t testing.TB) *fakeStore {
	t.Helper()
	s := &fakeStore{Store: fetchertest.New()}
	for range 3 {
		n, err := s.StartNode()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		s.nodes = append(s.nodes, n)
		s.addrs = append(s.addrs, n.Addr())
	}
	return s
}

// serving returns the node serving the main stream (the one with a Read).
func (s *fakeStore) serving() *fetchertest.Node {
	for _, n := range s.nodes {
		if n.Reads() > 0 {
			return n
		}
	}
	return nil
}

// testTarget is a target process stand-in: a target.Server (shard or
// recording MemStore) on a fixed loopback address that can be stopped and
// restarted on the same address with its durable state.
type testTarget struct {
	t      testing.TB
	id     string
	topics []string
	addr   string
	dir    string               // shard: bbolt directory
	skip   []types.LSN          // shard: target.Config.SkipLSNs
	store  target.Store         // non-shard target: survives restarts
	mem    *targettest.MemStore // recording target (also store)

	mu       sync.Mutex
	gs       *grpc.Server
	sh       *shard.Shard
	srv      *target.Server
	reg      *prometheus.Registry
	refusals map[string]float64 // of stopped incarnations, by reason
}

// newShardTarget starts a bbolt shard owning topics.
func newShardTarget(t testing.TB, id string, topics ...string) *testTarget {
	tt := &testTarget{t: t, id: id, topics: topics, dir: t.TempDir(), addr: "127.0.0.1:0", refusals: map[string]float64{}}
	tt.start()
	t.Cleanup(tt.stop)
	return tt
}

// newMemTarget starts an in-memory target that records every delivery it
// applies (the exact applied sequence).
func newMemTarget(t testing.TB, id string, topics ...string) *testTarget {
	mem := &targettest.MemStore{}
	tt := newStoreTarget(t, id, mem, topics...)
	tt.mem = mem
	return tt
}

// newStoreTarget starts a target on store.
func newStoreTarget(t testing.TB, id string, store target.Store, topics ...string) *testTarget {
	tt := &testTarget{t: t, id: id, topics: topics, store: store, addr: "127.0.0.1:0", refusals: map[string]float64{}}
	tt.start()
	t.Cleanup(tt.stop)
	return tt
}

func (tt *testTarget) config() TargetConfig {
	return TargetConfig{ID: tt.id, Address: tt.addr, Topics: tt.topics}
}

func (tt *testTarget) start() {
	tt.t.Helper()
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.gs != nil {
		tt.t.Fatalf("target %s already running", tt.id)
	}
	tt.reg = prometheus.NewRegistry()
	gs := grpc.NewServer(append(target.ServerOptions(), grpc.KeepaliveEnforcementPolicy(ServerKeepalive))...)
	if tt.dir != "" {
		sh, err := shard.Open(shard.Config{Dir: tt.dir, ID: types.TargetID(tt.id), Topics: tt.topics, SkipLSNs: tt.skip, Registerer: tt.reg, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			tt.t.Fatal(err)
		}
		sh.Register(gs)
		tt.sh = sh
	} else {
		srv, err := target.NewServer(target.Config{TargetID: types.TargetID(tt.id), Store: tt.store, Topics: tt.topics, Registerer: tt.reg, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			tt.t.Fatal(err)
		}
		srv.Register(gs)
		tt.srv = srv
	}
	var lis net.Listener
	// The old incarnation's port may linger briefly after a stop.
	testwait.ForErr(tt.t, testwait.Max, "listening on "+tt.addr, func() (err error) {
		lis, err = net.Listen("tcp", tt.addr)
		return err
	})
	tt.addr = lis.Addr().String()
	tt.gs = gs
	go func() { _ = gs.Serve(lis) }()
}

// stop kills the target: connections cut, files closed (the durable state
// stays).
func (tt *testTarget) stop() {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.gs == nil {
		return
	}
	tt.gs.Stop()
	for reason, v := range refusalCounts(tt.t, tt.reg) {
		tt.refusals[reason] += v
	}
	if tt.sh != nil {
		if err := tt.sh.Close(); err != nil {
			tt.t.Errorf("close shard %s: %v", tt.id, err)
		}
		tt.sh = nil
	} else {
		tt.srv.Close()
		tt.srv = nil
	}
	tt.gs = nil
}

func (tt *testTarget) restart() {
	tt.stop()
	tt.start()
}

// applied returns the target's durable applied LSN (0 while stopped).
func (tt *testTarget) applied() uint64 {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	switch {
	case tt.sh != nil:
		return uint64(tt.sh.AppliedLSN())
	case tt.store != nil:
		st, _ := tt.store.State()
		return uint64(st.AppliedLSN)
	}
	return 0
}

// allRefusals sums the target's refusal counters over every incarnation.
func (tt *testTarget) allRefusals() map[string]float64 {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	out := map[string]float64{}
	for k, v := range tt.refusals {
		out[k] += v
	}
	if tt.gs != nil {
		for k, v := range refusalCounts(tt.t, tt.reg) {
			out[k] += v
		}
	}
	return out
}

// harmlessRefusals are refusals a correct LogPlayer causes on purpose: an
// older stream replaced by a newer one of the same LogPlayer (superseded) or
// of a newer LogPlayer (stale_epoch). Every other reason means a bad
// delivery (duplicate, gap, protocol error).
var harmlessRefusals = map[string]bool{"superseded": true, "stale_epoch": true}

func (tt *testTarget) checkNoBadRefusals(t testing.TB) {
	t.Helper()
	for reason, v := range tt.allRefusals() {
		if v > 0 && !harmlessRefusals[reason] {
			t.Errorf("target %s: %v refusals for %q", tt.id, v, reason)
		}
	}
}

func refusalCounts(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "target_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, "reason")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// shardsAndRecorder starts shard-0, shard-1 and shard-2 (each owning its
// topic) and a recording target "rec" subscribed to recTopics.
func shardsAndRecorder(t testing.TB, recTopics ...string) []*testTarget {
	var out []*testTarget
	for i := range 3 {
		id := fmt.Sprintf("shard-%d", i)
		out = append(out, newShardTarget(t, id, id))
	}
	return append(out, newMemTarget(t, "rec", recTopics...))
}

// checkTargets checks that every target holds exactly the log filtered to
// its topics (the applied sequence for recording targets, the bbolt state
// for shards) and refused nothing but harmless stream takeovers.
func checkTargets(t testing.TB, log []*logstorepb.Transaction, targets ...*testTarget) {
	t.Helper()
	for _, tt := range targets {
		tt.checkNoBadRefusals(t)
		if tt.mem != nil {
			tt.checkSequence(t, log)
		} else {
			tt.checkShard(t, log)
		}
	}
}

// checkShard compares a shard's state with the model built from the log.
func (tt *testTarget) checkShard(t testing.TB, log []*logstorepb.Transaction) {
	t.Helper()
	want := map[string][]byte{}
	offsets := map[string]uint64{}
	for _, txn := range log {
		if err := shard.ModelApply(want, tt.topics, txn.Slices); err != nil {
			t.Fatal(err)
		}
		for _, sl := range txn.Slices {
			if slices.Contains(tt.topics, sl.Topic) {
				offsets[sl.Topic] = sl.FirstOffset + uint64(len(sl.Messages))
			}
		}
	}
	tt.stop() // read the bbolt file as a restart would find it
	got, st, err := shard.ReadDir(tt.dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedLSN != types.LSN(len(log)) {
		t.Errorf("shard %s: applied %d, log head %d", tt.id, st.AppliedLSN, len(log))
	}
	if fmt.Sprint(st.Topics) != fmt.Sprint(offsets) {
		t.Errorf("shard %s: offsets %v, want %v", tt.id, st.Topics, offsets)
	}
	if len(got) != len(want) {
		t.Errorf("shard %s: %d keys, want %d", tt.id, len(got), len(want))
	}
	for k, v := range want {
		if string(got[k]) != string(v) {
			t.Errorf("shard %s: key %q = %q, want %q", tt.id, k, got[k], v)
			break
		}
	}
}

// checkSequence compares a recording target's applied deliveries with the
// log filtered to its topics: same LSNs, same slices, in order, exactly once.
func (tt *testTarget) checkSequence(t testing.TB, log []*logstorepb.Transaction) {
	t.Helper()
	var want, got []string
	for _, txn := range log {
		if s := describe(txn.Lsn, txn.Slices, tt.topics); s != "" {
			want = append(want, s)
		}
	}
	for _, d := range tt.mem.Applied() {
		if s := describe(d.Lsn, d.Slices, tt.topics); s != "" {
			got = append(got, s)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("target %s applied %d deliveries, want %d; first difference:\n%s", tt.id, len(got), len(want), firstDiff(got, want))
	}
}

func describe(lsn uint64, ss []*logstorepb.TxnSlice, topics []string) string {
	var parts []string
	for _, s := range ss {
		if !slices.Contains(topics, s.Topic) {
			continue
		}
		var vals []string
		for _, m := range s.Messages {
			vals = append(vals, string(m.Value))
		}
		parts = append(parts, fmt.Sprintf("%s@%d=%q", s.Topic, s.FirstOffset, vals))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s", lsn, strings.Join(parts, " "))
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("at %d: got  %s\n        want %s", i, g, w)
		}
	}
	return "none"
}

// workload appends transactions of 1..3 random shard topics (plus
// sometimes a topic nobody subscribes to) with PUT/DELETE mutations.
type workload struct {
	rng    *rand.Rand
	topics []string
	n      int
}

func newWorkload(seed uint64, topics ...string) *workload {
	return &workload{rng: rand.New(rand.NewPCG(seed, 1)), topics: topics}
}

func (w *workload) next() []*logstorepb.Slice {
	w.n++
	var out []*logstorepb.Slice
	for _, i := range w.rng.Perm(len(w.topics))[:1+w.rng.IntN(min(3, len(w.topics)))] {
		sl := &logstorepb.Slice{Topic: w.topics[i]}
		for j := range 1 + w.rng.IntN(3) {
			key := []byte(fmt.Sprintf("k%d", w.rng.IntN(50)))
			v := shard.EncodePut(key, []byte(fmt.Sprintf("v%d.%d", w.n, j)))
			if w.rng.IntN(10) == 0 {
				v = shard.EncodeDelete(key)
			}
			sl.Messages = append(sl.Messages, &logstorepb.Message{Value: v})
		}
		out = append(out, sl)
	}
	if w.rng.IntN(5) == 0 {
		out = append(out, &logstorepb.Slice{Topic: "unsubscribed", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
	}
	return out
}

// playerRun is a Player running in the background.
type playerRun struct {
	p      *Player
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

// startPlayer starts a Player on store (nil: tweak sets Config.LogStore).
func startPlayer(t testing.TB, store *fakeStore, targets []*testTarget, tweak func(*Config)) *playerRun {
	t.Helper()
	var tcs []TargetConfig
	for _, tt := range targets {
		tcs = append(tcs, tt.config())
	}
	reg := prometheus.NewRegistry()
	var addrs []string
	if store != nil {
		addrs = store.addrs
	}
	cfg := Config{
		LogStore:         addrs,
		Targets:          tcs,
		HandshakeTimeout: 2 * time.Second,
		RetryInitial:     5 * time.Millisecond,
		RetryMax:         100 * time.Millisecond,
		ProgressInterval: 20 * time.Millisecond,
		ReportInterval:   20 * time.Millisecond,
		Logger:           testLogger(t),
		Registerer:       reg,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &playerRun{p: p, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	// AddTarget and the admin calls answer ErrNotRunning until Run marked
	// the Player started: wait for that, so a test can call them at once.
	testwait.For(t, testwait.Max, "Run to start", func() bool {
		p.admin.Lock()
		defer p.admin.Unlock()
		return p.admin.started
	})
	return r
}

// stop cancels the player and waits for Run (it must return nil).
func (r *playerRun) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("Run: %v", err)
	}
	r.p.Close()
}

// waitApplied waits until every target applied the store's head.
func waitApplied(t testing.TB, store *fakeStore, targets ...*testTarget) {
	t.Helper()
	head := store.Head()
	for _, tt := range targets {
		testwait.For(t, testwait.Max, fmt.Sprintf("target %s to apply lsn %d", tt.id, head), func() bool { return tt.applied() >= head })
	}
}

// storeLog returns the whole log.
func storeLog(s *fakeStore) []*logstorepb.Transaction {
	var out []*logstorepb.Transaction
	for lsn := uint64(1); lsn <= s.Head(); lsn++ {
		out = append(out, s.Txn(lsn))
	}
	return out
}

// dialFetcher builds a Fetcher over the fake store (for tests that share one).
func dialFetcher(t testing.TB, s *fakeStore) *fetcher.Fetcher {
	var clients []logstorepb.LogStoreClient
	for _, a := range s.addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		clients = append(clients, logstorepb.NewLogStoreClient(cc))
	}
	f, err := fetcher.New(fetcher.Config{Nodes: clients, RetryInitial: time.Millisecond, RetryMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
