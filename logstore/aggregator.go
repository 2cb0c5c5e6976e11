package logstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// pending is one request waiting for its Raft entry to apply.
type pending struct {
	cmd  *logstorepb.Command
	size int
	// done has capacity 1 so the completer never blocks on a requester
	// that stopped waiting.
	done chan cmdResult
}

// inflightEntry is one Raft entry the aggregator handed to Raft.
type inflightEntry struct {
	future raft.ApplyFuture
	batch  []*pending
	start  time.Time
}

// aggregator turns many requests into few Raft entries (DESIGN.md §4).
//
// Goroutines: run (fed by submit through intake; owns the batch being built,
// the count of entries in flight and the leader timestamp) and complete
// (fed by run through inflight; owns the futures, answers each request and
// tells run through freed that an entry resolved).
//
// Batching is group commit without linger: when no entry is in flight a
// request goes out at once, alone if it is alone. While entries are in
// flight, requests gather in the batch, which goes out when an entry
// resolves; a batch that reaches PipelineMinTxns commands (or a quarter of
// MaxBatchBytes) goes out before that, up to MaxInflightEntries entries in
// flight. On one shared disk (three nodes of a test or benchmark) fewer,
// larger entries mean fewer fsyncs per transaction on every node; under
// heavy load the pipeline still keeps Raft busy.
type aggregator struct {
	raft        *raft.Raft
	metrics     *metrics
	now         func() time.Time
	maxTxns     int
	maxBytes    int
	pipeTxns    int
	maxInflight int
	timeout     time.Duration

	intake   chan *pending       // capacity Config.IntakeQueue: the back-pressure bound
	inflight chan *inflightEntry // capacity MaxInflightEntries: run never has more outstanding
	freed    chan struct{}       // capacity MaxInflightEntries: one signal per resolved entry
	stop     chan struct{}
	dead     chan struct{} // closed when both goroutines have ended
	lastTS   int64         // run only
	stopOnce sync.Once
}

func newAggregator(r *raft.Raft, cfg *Config, m *metrics) *aggregator {
	a := &aggregator{
		raft: r, metrics: m, now: cfg.Now,
		maxTxns: cfg.MaxBatchTxns, maxBytes: cfg.MaxBatchBytes, pipeTxns: cfg.PipelineMinTxns,
		maxInflight: cfg.MaxInflightEntries, timeout: cfg.RaftTimeout,
		intake:   make(chan *pending, cfg.IntakeQueue),
		inflight: make(chan *inflightEntry, cfg.MaxInflightEntries),
		freed:    make(chan struct{}, cfg.MaxInflightEntries),
		stop:     make(chan struct{}),
		dead:     make(chan struct{}),
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.run() }()
	go func() { defer wg.Done(); a.complete() }()
	go func() { wg.Wait(); a.drain(); close(a.dead) }()
	return a
}

// submit queues cmd (encoded size bytes) and waits for its result. A full
// intake is ErrQueueFull at once. When ctx ends first the request may still
// be applied: the error wraps apierr.ErrUnknownOutcome's meaning through the
// context error.
func (a *aggregator) submit(ctx context.Context, cmd *logstorepb.Command, size int) (proto.Message, error) {
	p := &pending{cmd: cmd, size: size, done: make(chan cmdResult, 1)}
	select {
	case <-a.stop:
		return nil, apierr.ErrShuttingDown
	default:
	}
	select {
	case a.intake <- p:
		a.metrics.intakeDepth.Set(float64(len(a.intake)))
	default:
		return nil, apierr.ErrQueueFull
	}
	select {
	case r := <-p.done:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-a.dead:
		select {
		case r := <-p.done:
			return r.resp, r.err
		default:
			return nil, apierr.ErrShuttingDown
		}
	}
}

func (a *aggregator) run() {
	defer close(a.inflight)
	var batch []*pending
	bytes, outstanding := 0, 0
	for {
		full := len(batch) >= a.maxTxns || bytes >= a.maxBytes
		big := len(batch) >= a.pipeTxns || bytes >= a.maxBytes/4
		if len(batch) > 0 && (outstanding == 0 || (big && outstanding < a.maxInflight)) {
			a.send(batch)
			batch, bytes = nil, 0
			outstanding++
			a.metrics.inflightEntries.Set(float64(outstanding))
			continue
		}
		intake := a.intake
		if full {
			intake = nil // wait for an entry to resolve
		}
		select {
		case p := <-intake:
			batch, bytes = append(batch, p), bytes+p.size
		fill:
			for len(batch) < a.maxTxns && bytes < a.maxBytes {
				select {
				case p := <-a.intake:
					batch, bytes = append(batch, p), bytes+p.size
				default:
					break fill
				}
			}
			a.metrics.intakeDepth.Set(float64(len(a.intake)))
		case <-a.freed:
			outstanding--
			a.metrics.inflightEntries.Set(float64(outstanding))
		case <-a.stop:
			for _, p := range batch {
				p.done <- cmdResult{err: apierr.ErrShuttingDown}
			}
			return
		}
	}
}

// send hands one entry of batch to Raft.
func (a *aggregator) send(batch []*pending) {
	ts := max(a.now().UnixNano(), a.lastTS)
	a.lastTS = ts
	e := &logstorepb.Entry{TimestampUnixNano: ts, Commands: make([]*logstorepb.Command, len(batch))}
	for i, p := range batch {
		e.Commands[i] = p.cmd
	}
	data, err := proto.Marshal(e)
	if err != nil {
		panic("logstore: marshal entry: " + err.Error()) // validated protos always marshal
	}
	a.metrics.batchTxns.Observe(float64(len(batch)))
	a.metrics.batchBytes.Observe(float64(len(data)))
	a.inflight <- &inflightEntry{future: a.raft.Apply(data, a.timeout), batch: batch, start: time.Now()}
}

func (a *aggregator) complete() {
	for ie := range a.inflight {
		err := ie.future.Error()
		a.freed <- struct{}{}
		if err != nil {
			err = raftErr(err)
			for _, p := range ie.batch {
				p.done <- cmdResult{err: err}
			}
			continue
		}
		a.metrics.commitDuration.Observe(time.Since(ie.start).Seconds())
		res, ok := ie.future.Response().([]cmdResult)
		if !ok || len(res) != len(ie.batch) {
			panic("logstore: apply result does not match the entry's commands")
		}
		for i, p := range ie.batch {
			p.done <- res[i]
		}
	}
}

// raftErr maps a failed Apply future: ErrNotLeader and ErrEnqueueTimeout
// mean the entry never entered the log (safe to retry); anything else may
// have committed.
func raftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return apierr.ErrNotLeader
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return apierr.ErrQueueFull
	default:
		return apierr.ErrUnknownOutcome
	}
}

// drain answers what is left in intake after the goroutines ended.
func (a *aggregator) drain() {
	for {
		select {
		case p := <-a.intake:
			p.done <- cmdResult{err: apierr.ErrShuttingDown}
		default:
			return
		}
	}
}

// close stops the goroutines; Raft must be shut down first so in-flight
// futures resolve. It waits for them to end.
func (a *aggregator) close() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.dead
}
