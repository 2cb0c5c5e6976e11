package api

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// benchNode is a leader that has caught up, with an empty state: what
// server.Append reads of its node.
type benchNode struct {
	Node // unused methods: nil
	st   *fsm.State
}

// benchRaft is benchNode's Raft: a leader.
type benchRaft struct{ Raft }

func (benchRaft) State() raft.RaftState { return raft.Leader }

func (n *benchNode) Raft() Raft                     { return benchRaft{} }
func (n *benchNode) State() raft.RaftState          { return raft.Leader }
func (n *benchNode) View(fn func(st *fsm.State))    { fn(n.st) }
func (n *benchNode) CaughtUp(context.Context) error { return nil }
func (n *benchNode) Log() Log                       { return nil }

// benchApplier answers every entry at once, each command with an
// AppendResponse (the FSM takes the entry from Sent, as on a leader).
type benchApplier struct{ sent *Sent }

type doneFuture struct{ resp []fsm.Result }

func (f doneFuture) Error() error  { return nil }
func (f doneFuture) Index() uint64 { return 0 }
func (f doneFuture) Response() any { return f.resp }

func (r benchApplier) Apply(data []byte, _ time.Duration) raft.ApplyFuture {
	e := r.sent.Take(data)
	res := make([]fsm.Result, len(e.Commands))
	for i := range res {
		res[i] = fsm.Result{Resp: &logstorepb.AppendResponse{Lsn: uint64(i + 1)}}
	}
	return doneFuture{res}
}

// BenchmarkServerAppend is the edge's own cost of one serial Append
// (handler, admission, aggregator, response; no gRPC, Raft answers at
// once): what docs/BENCHMARKS.md "Server per-call cost" measures.
func BenchmarkServerAppend(b *testing.B) {
	s, req := benchServer(b)
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		if _, err := s.Append(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkServerAdmit is the handler's synchronous part of a serial
// Append (admission, the version gate, the latency metric), without the
// hand-offs to the aggregator's goroutines.
func BenchmarkServerAdmit(b *testing.B) {
	s, req := benchServer(b)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		a, err := s.admitAppend(req, true)
		if err == nil {
			err = a.gateErr
		}
		if err != nil {
			b.Fatal(err)
		}
		s.metrics.appendAnswered(nil, time.Millisecond)
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far, in ns
// (the aggregator's goroutines included; wall time on a shared machine is
// mostly waiting for them to be scheduled).
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func benchServer(b *testing.B) (*server, *logstorepb.AppendRequest) {
	m, err := NewMetrics(prometheus.NewRegistry(), "b")
	if err != nil {
		b.Fatal(err)
	}
	sent := NewSent()
	// logstore.Config's defaults (logstore/config.go).
	agg := NewAggregator(benchApplier{sent}, AggregatorConfig{Now: time.Now, IntakeQueue: 8192, IntakeQueueBytes: 256 << 20,
		MaxBatchTxns: 1024, MaxBatchBytes: 1 << 20, PipelineMinTxns: 64, MaxInflightEntries: 4,
		RaftTimeout: 10 * time.Second, Limits: &logstorepb.ApplyLimits{}, Sent: sent}, m)
	b.Cleanup(agg.Close)
	n := &benchNode{st: fsm.NewState()}
	s := &server{node: n, raft: benchRaft{}, agg: agg, metrics: m,
		cfg: Config{ID: "b", Limits: Limits{MaxMessageBytes: 1 << 20, MaxRequestBytes: 4 << 20}}}
	req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: "t0", Messages: []*logstorepb.Message{{Value: make([]byte, 256)}}},
		{Topic: "t1", Messages: []*logstorepb.Message{{Value: make([]byte, 256)}}},
	}}
	return s, req
}
