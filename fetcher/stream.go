package fetcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/storeconn"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Handler receives one transaction of a stream, in LSN order. Returning an
// error ends the stream: Follow or ReadRange returns that error unchanged.
// The transaction is shared: the handler must not modify it.
type Handler func(txn *logstorepb.Transaction) error

// The streams' policies: reopened on another node after any failure but
// below retention; the main stream follows the Raft leader.
var (
	mainPolicy     = storeconn.StreamPolicy{Name: "main", Retry: apierr.Final, Leader: true, ProbeLeader: true}
	recoveryPolicy = storeconn.StreamPolicy{Name: "recovery", Retry: apierr.Final}
)

// Follow is the main stream: it hands every transaction from LSN from on to
// handle, in order, without gap or duplicate, forever. When a node fails or a
// stream breaks it reconnects with backoff to the next node and resumes after
// the last LSN handed out. It returns only when ctx ends (ctx.Err()), when
// handle returns an error (that error), or when the log no longer holds the
// next LSN (a *BelowRetentionError).
func (f *Fetcher) Follow(ctx context.Context, from types.LSN, handle Handler) error {
	if from == 0 {
		return errors.New("fetcher: Follow from lsn 0 (LSNs start at 1)")
	}
	var waiting atomic.Uint64 // the next LSN, for the stall watchdog's goroutine
	waiting.Store(uint64(from))
	r := storeconn.NewLogReader(f.sc, mainPolicy, &logstorepb.ReadRequest{FromLsn: uint64(from), MaxBatch: f.cfg.MaxBatch},
		f.opener("main", func() types.LSN { return types.LSN(waiting.Load()) }))
	defer r.Close()
	for {
		resp, err := r.Next(ctx)
		if err != nil {
			var ce *storeconn.ContinuityError
			if errors.As(err, &ce) {
				if ce.Got != 0 {
					panic(fmt.Sprintf("fetcher: main stream continuity broken: want lsn %d, got %d", ce.Want, ce.Got))
				}
				panic(fmt.Sprintf("fetcher: main stream skipped lsns: read through %d but next transaction sent is %d",
					ce.ReadThrough, ce.Want))
			}
			return f.streamErr(ctx, "main", err, r.Position())
		}
		for _, txn := range resp.Transactions {
			if err := handle(txn); err != nil {
				return err
			}
			waiting.Store(txn.Lsn + 1)
			f.metrics.mainNext.Set(float64(txn.Lsn + 1))
		}
	}
}

// streamErr is what a stream returns after the reader failed with err at
// LSN from: ctx's error, a *BelowRetentionError, or err.
func (f *Fetcher) streamErr(ctx context.Context, kind string, err error, from types.LSN) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if oldest, ok := apierr.BelowRetention(err); ok {
		f.metrics.belowRetention.WithLabelValues(kind).Inc()
		return &BelowRetentionError{From: from, Oldest: oldest}
	}
	return err
}

// errStalled ends a main stream that sent nothing for StallTimeout while
// another node holds the LSN it waits for (its node is partitioned away or
// its connection hangs).
var errStalled = errors.New("fetcher: main stream stalled while another node is ahead")

// opener opens the Read streams of one Follow or ReadRange: it counts
// reopenings and, with want (the main stream), arms the stall watchdog.
func (f *Fetcher) opener(kind string, want func() types.LSN) storeconn.LogOpener {
	opened := false
	return func(ctx context.Context, node int, ls logstorepb.LogStoreClient, req *logstorepb.ReadRequest) (func() (*logstorepb.ReadResponse, error), error) {
		if opened {
			f.metrics.reconnects.WithLabelValues(kind).Inc()
		}
		opened = true
		if want == nil || f.cfg.StallTimeout <= 0 {
			return storeconn.Recv(ls.Read(ctx, req))
		}
		ctx, cancel := context.WithCancelCause(ctx)
		var last atomic.Int64
		last.Store(time.Now().UnixNano())
		s, err := ls.Read(ctx, req)
		if err != nil {
			cancel(nil)
			return nil, err
		}
		go f.watchStall(ctx, cancel, node, &last, want)
		return func() (*logstorepb.ReadResponse, error) {
			resp, err := s.Recv()
			if err != nil {
				if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
					return nil, cause
				}
				return nil, err
			}
			last.Store(time.Now().UnixNano())
			return resp, nil
		}, nil
	}
}

// watchStall cancels the stream on node with errStalled when nothing
// arrived for StallTimeout (last holds the Unix nanoseconds of the last
// response) and another node's head reaches want(). It returns when the
// stream's ctx ends.
func (f *Fetcher) watchStall(ctx context.Context, cancel context.CancelCauseFunc, node int, last *atomic.Int64,
	want func() types.LSN) {
	t := time.NewTicker(f.cfg.StallTimeout / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, last.Load())) < f.cfg.StallTimeout {
			continue
		}
		f.sc.Heads(ctx, node, func(i int, head types.LSN) bool {
			if head < want() {
				return false
			}
			f.metrics.stalls.Inc()
			cancel(fmt.Errorf("%w: node %d has lsn %d", errStalled, i, head))
			return true
		})
	}
}

// ReadRange is a recovery stream: it hands to handle, in LSN order, every
// transaction in (after, to] that has a slice of one of topics (all
// transactions when topics is empty), with only those slices. It returns nil
// once everything through to has been read, handle's error if handle fails,
// ctx.Err() when ctx ends, or a *BelowRetentionError when the LogStore no
// longer holds after+1. Node failures are retried like Follow's.
func (f *Fetcher) ReadRange(ctx context.Context, after, to types.LSN, topics []string, handle Handler) error {
	if to <= after {
		return nil
	}
	r := storeconn.NewLogReader(f.sc, recoveryPolicy,
		&logstorepb.ReadRequest{FromLsn: uint64(after + 1), ToLsn: uint64(to), Topics: topics, MaxBatch: f.cfg.MaxBatch}, f.opener("recovery", nil))
	defer r.Close()
	readErr := func(err error) error {
		var ce *storeconn.ContinuityError
		if errors.As(err, &ce) {
			if ce.Got != 0 {
				panic(fmt.Sprintf("fetcher: recovery stream (%d, %d] out of order: got lsn %d, want >= %d",
					after, to, ce.Got, ce.Want))
			}
			panic(fmt.Sprintf("fetcher: recovery stream (%d, %d] read through %d", after, to, ce.ReadThrough))
		}
		return f.streamErr(ctx, "recovery", err, r.Position())
	}
	return storeconn.Drain(ctx, r.Next, readErr, func(resp *logstorepb.ReadResponse) error {
		for _, txn := range resp.Transactions {
			if err := handle(txn); err != nil {
				return err
			}
		}
		return nil
	})
}
