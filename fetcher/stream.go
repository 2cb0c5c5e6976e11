package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Handler receives one transaction of a stream, in LSN order. Returning an
// error ends the stream: Follow or ReadRange returns that error unchanged.
// The transaction is shared: the handler must not modify it.
type Handler func(txn *logstorepb.Transaction) error

// handlerError marks an error that came from the Handler, not the stream.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// Follow is the main stream: it hands every transaction from LSN from on to
// handle, in order, without gap or duplicate, forever. When a node fails or a
// stream breaks it reconnects with backoff to the next node and resumes after
// the last LSN handed out. It returns only when ctx ends (ctx.Err()), when
// handle returns an error (that error), or when the log no longer holds the
// next LSN (a *BelowRetentionError).
func (f *Fetcher) Follow(ctx context.Context, from uint64, handle Handler) error {
	if from == 0 {
		return errors.New("fetcher: Follow from lsn 0 (LSNs start at 1)")
	}
	next := from
	var waiting atomic.Uint64 // next, for the stall watchdog's goroutine
	waiting.Store(next)
	onResp := func(resp *logstorepb.ReadResponse) error {
		for _, txn := range resp.Transactions {
			if txn.Lsn != next {
				panic(fmt.Sprintf("fetcher: main stream continuity broken: want lsn %d, got %d", next, txn.Lsn))
			}
			if err := handle(txn); err != nil {
				return handlerError{err}
			}
			next++
			waiting.Store(next)
			f.metrics.mainNext.Set(float64(next))
		}
		if resp.ReadThroughLsn >= next {
			panic(fmt.Sprintf("fetcher: main stream skipped lsns: read through %d but next transaction sent is %d",
				resp.ReadThroughLsn, next))
		}
		return nil
	}
	return f.stream(ctx, "main", func() (*logstorepb.ReadRequest, bool) {
		f.preferLeader(ctx)
		return &logstorepb.ReadRequest{FromLsn: next, MaxBatch: f.cfg.MaxBatch}, true
	}, onResp, waiting.Load)
}

// errStalled ends a main stream that sent nothing for StallTimeout while
// another node holds the LSN it waits for (its node is partitioned away or
// its connection hangs).
var errStalled = errors.New("fetcher: main stream stalled while another node is ahead")

// watchStall cancels the stream on node with errStalled when nothing
// arrived for StallTimeout (last holds the Unix nanoseconds of the last
// response) and another node's head reaches want(). It returns when done
// closes.
func (f *Fetcher) watchStall(ctx context.Context, cancel context.CancelCauseFunc, node int, last *atomic.Int64,
	want func() uint64, done <-chan struct{}) {
	t := time.NewTicker(f.cfg.StallTimeout / 2)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, last.Load())) < f.cfg.StallTimeout {
			continue
		}
		for i, n := range f.cfg.Nodes {
			if i == node {
				continue
			}
			pctx, pcancel := context.WithTimeout(ctx, leaderProbeTimeout)
			st, err := n.Status(pctx, &logstorepb.StatusRequest{})
			pcancel()
			if err == nil && st.HeadLsn >= want() {
				f.metrics.stalls.Inc()
				cancel(fmt.Errorf("%w: node %d has lsn %d", errStalled, i, st.HeadLsn))
				return
			}
		}
	}
}

// leaderProbeTimeout bounds each Status call of preferLeader.
const leaderProbeTimeout = time.Second

// preferLeader points the cursor at the Raft leader: the leader applies a
// commit first, a follower only when the next AppendEntries tells it (up to
// the commit timeout later), so a main stream on the leader delivers
// sooner. When several nodes claim to lead (an old leader cut off keeps
// claiming until its lease ends), the highest Raft term wins. Any node is
// correct; this is only latency.
func (f *Fetcher) preferLeader(ctx context.Context) {
	if len(f.cfg.Nodes) == 1 {
		return
	}
	best, bestTerm := -1, uint64(0)
	for i, n := range f.cfg.Nodes {
		pctx, cancel := context.WithTimeout(ctx, leaderProbeTimeout)
		st, err := n.Status(pctx, &logstorepb.StatusRequest{})
		cancel()
		if err == nil && st.Role == "leader" && (best < 0 || st.RaftTerm > bestTerm) {
			best, bestTerm = i, st.RaftTerm
		}
	}
	if best >= 0 {
		cur := f.next.Load()
		f.next.CompareAndSwap(cur, cur-cur%uint64(len(f.cfg.Nodes))+uint64(best))
	}
}

// ReadRange is a recovery stream: it hands to handle, in LSN order, every
// transaction in (after, to] that has a slice of one of topics (all
// transactions when topics is empty), with only those slices. It returns nil
// once everything through to has been read, handle's error if handle fails,
// ctx.Err() when ctx ends, or a *BelowRetentionError when the LogStore no
// longer holds after+1. Node failures are retried like Follow's.
func (f *Fetcher) ReadRange(ctx context.Context, after, to uint64, topics []string, handle Handler) error {
	if to <= after {
		return nil
	}
	next := after + 1 // every LSN below next has been considered
	onResp := func(resp *logstorepb.ReadResponse) error {
		for _, txn := range resp.Transactions {
			if txn.Lsn < next || txn.Lsn > to {
				panic(fmt.Sprintf("fetcher: recovery stream (%d, %d] out of order: got lsn %d, want >= %d",
					after, to, txn.Lsn, next))
			}
			if err := handle(txn); err != nil {
				return handlerError{err}
			}
			next = txn.Lsn + 1
		}
		if rt := resp.ReadThroughLsn; rt+1 > next {
			if rt > to {
				panic(fmt.Sprintf("fetcher: recovery stream (%d, %d] read through %d", after, to, rt))
			}
			next = rt + 1
		}
		return nil
	}
	return f.stream(ctx, "recovery", func() (*logstorepb.ReadRequest, bool) {
		if next > to {
			return nil, false
		}
		return &logstorepb.ReadRequest{FromLsn: next, ToLsn: to, Topics: topics, MaxBatch: f.cfg.MaxBatch}, true
	}, onResp, nil)
}

// stream runs Read requests built by nextReq (false: done) against one node
// after another until done, a handler error, BELOW_RETENTION, or ctx ends.
// With want (the main stream), a stream that stalls while another node is
// ahead is abandoned (see watchStall).
func (f *Fetcher) stream(ctx context.Context, kind string, nextReq func() (*logstorepb.ReadRequest, bool),
	onResp func(*logstorepb.ReadResponse) error, want func() uint64) error {
	bo := f.newBackoff()
	for attempt := 0; ; attempt++ {
		req, more := nextReq()
		if !more {
			return nil
		}
		if attempt > 0 {
			f.metrics.reconnects.WithLabelValues(kind).Inc()
		}
		cur, node := f.pick()
		progressed, err := f.readOnce(ctx, node, req, onResp, want)
		var he handlerError
		switch {
		case errors.As(err, &he):
			return he.err
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && progressed:
			// The server ended the stream cleanly: a bounded range is done
			// (nextReq says so), a follow stream must not end: reconnect.
			bo.Reset()
			continue
		case err == nil:
			err = errors.New("stream ended without sending anything")
		}
		if br := belowRetention(err, req.FromLsn); br != nil {
			f.metrics.belowRetention.WithLabelValues(kind).Inc()
			return br
		}
		if progressed {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		f.cfg.Logger.Warn("logstore read stream failed, reconnecting",
			"stream", kind, "node", node, "lsn", req.FromLsn, "retry_in", wait, "err", err)
		f.advance(cur)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// readOnce runs one Read stream on one node. progressed says whether any
// response arrived (so the backoff can start over). A nil error means the
// server ended the stream. want, when set, arms the stall watchdog.
func (f *Fetcher) readOnce(ctx context.Context, node int, req *logstorepb.ReadRequest,
	onResp func(*logstorepb.ReadResponse) error, want func() uint64) (progressed bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	if want != nil && f.cfg.StallTimeout > 0 {
		done := make(chan struct{})
		defer close(done)
		go f.watchStall(ctx, cancel, node, &last, want, done)
	}
	stream, err := f.cfg.Nodes[node].Read(ctx, req)
	if err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return progressed, nil
		}
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
				return progressed, cause
			}
			return progressed, err
		}
		last.Store(time.Now().UnixNano())
		progressed = true
		if err := onResp(resp); err != nil {
			return true, err
		}
	}
}
