package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Appender commits one transaction (a LogStore client that follows the
// leader), and registers a producer name (client.Client.InitProducer):
// the workload's producers are registered, so the cluster needs no
// legacy-producer opt-in (store --allow-legacy-producers).
type Appender interface {
	Append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error)
	InitProducer(ctx context.Context, name string) (id string, epoch uint64, err error)
}

// Defaults of Config.
const (
	DefaultClients = 8
	DefaultShards  = 3
	// DefaultAppendTimeout bounds one Append attempt.
	DefaultAppendTimeout = 10 * time.Second
	// DefaultRetryMax bounds the retries of one transaction (same producer
	// sequence, so a retry never writes twice).
	DefaultRetryMax = 30 * time.Second
)

// Config configures Run.
type Config struct {
	Appender Appender
	// Clients is the number of concurrent producers.
	Clients int
	// Shards is the number of shard topics (shard-0 … shard-N-1).
	Shards int
	// Duration is how long new transactions are started.
	Duration time.Duration
	// Run names this run (4 hex digits, see NewRunID); Seed feeds the
	// generators.
	Run  string
	Seed uint64
	// Progress, when set, is called about once a second from one goroutine.
	Progress      func(Progress)
	AppendTimeout time.Duration
	RetryMax      time.Duration
	Logger        *slog.Logger
	Now           func() time.Time
}

func (c *Config) validate() error {
	if c.Appender == nil {
		return errors.New("demo: Appender is nil")
	}
	if c.Duration <= 0 {
		return fmt.Errorf("demo: duration %v, want > 0", c.Duration)
	}
	c.Clients = cmp.Or(c.Clients, DefaultClients)
	c.Shards = cmp.Or(c.Shards, DefaultShards)
	if c.Clients < 0 || c.Shards < 2 {
		return fmt.Errorf("demo: %d clients and %d shards, want clients >= 1 and shards >= 2", c.Clients, c.Shards)
	}
	if len(c.Run) != 4 {
		return fmt.Errorf("demo: run id %q, want 4 hex digits", c.Run)
	}
	c.AppendTimeout = cmp.Or(c.AppendTimeout, DefaultAppendTimeout)
	c.RetryMax = cmp.Or(c.RetryMax, DefaultRetryMax)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Progress is the workload's state, reported once a second.
type Progress struct {
	Elapsed   time.Duration
	Committed int64   // acknowledged transactions so far
	Rate      float64 // acknowledged transactions per second over the last report
	MaxLSN    uint64  // highest acknowledged LSN
}

// Result is what the workload did.
type Result struct {
	Committed int // acknowledged transactions
	Retries   int // Append attempts that failed and were retried
	// Starts maps each acknowledged LSN to the start of its first Append
	// attempt; Commit holds each acknowledged Append's latency.
	Starts map[uint64]time.Time
	// Acked maps each acknowledged LSN to the transaction's id (the key of
	// its orders event), so a check can find it in the log.
	Acked   map[uint64]string
	Commit  []time.Duration
	MinLSN  uint64
	MaxLSN  uint64
	Elapsed time.Duration
}

// Run drives the workload for cfg.Duration (or until ctx ends) and returns
// what was acknowledged. Each client's producer name (Generator.Name) is
// registered first, before the duration starts. A transaction whose Append fails with a retryable
// error is retried with the same producer sequence until cfg.RetryMax; a
// permanent error (UNKNOWN_PRODUCER and PRODUCER_FENCED too: the workload
// does not re-register) stops the run and is returned.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	gens := make([]*Generator, cfg.Clients)
	registerRetries := 0
	for i := range gens {
		g := NewGenerator(cfg.Run, i, cfg.Shards, cfg.Seed)
		var id string
		var epoch uint64
		retries, err := retrying(ctx, cfg, func(ctx context.Context) error {
			var err error
			id, epoch, err = cfg.Appender.InitProducer(ctx, g.Name())
			return err
		})
		registerRetries += retries
		if err != nil {
			return nil, fmt.Errorf("register producer %s: %w", g.Name(), err)
		}
		g.Registered(id, epoch)
		gens[i] = g
	}
	start := cfg.Now()
	stopAt := start.Add(cfg.Duration)
	var committed atomic.Int64
	var maxLSN atomic.Uint64
	results := make([]clientResult, cfg.Clients)
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var wg sync.WaitGroup
	for i := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := gens[i]
			r := &results[i]
			r.starts = map[uint64]time.Time{}
			r.acked = map[uint64]string{}
			for cfg.Now().Before(stopAt) && runCtx.Err() == nil {
				req := g.Next()
				t0 := cfg.Now()
				resp, retries, err := appendRetrying(runCtx, cfg, req)
				r.retries += retries
				if err != nil {
					if runCtx.Err() == nil {
						cancel(fmt.Errorf("producer %s seq %d: %w", req.ProducerId, req.Sequence, err))
					}
					return
				}
				r.commit = append(r.commit, cfg.Now().Sub(t0))
				r.starts[resp.Lsn] = t0
				r.acked[resp.Lsn] = TxnID(req)
				committed.Add(1)
				for {
					m := maxLSN.Load()
					if resp.Lsn <= m || maxLSN.CompareAndSwap(m, resp.Lsn) {
						break
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if cfg.Progress != nil {
		reportProgress(cfg, start, done, &committed, &maxLSN)
	}
	<-done

	res := &Result{Retries: registerRetries, Starts: map[uint64]time.Time{}, Acked: map[uint64]string{}, Elapsed: cfg.Now().Sub(start)}
	for _, r := range results {
		res.Retries += r.retries
		res.Commit = append(res.Commit, r.commit...)
		for lsn, id := range r.acked {
			res.Acked[lsn] = id
		}
		for lsn, t := range r.starts {
			res.Starts[lsn] = t
			if res.MinLSN == 0 || lsn < res.MinLSN {
				res.MinLSN = lsn
			}
			res.MaxLSN = max(res.MaxLSN, lsn)
		}
	}
	res.Committed = len(res.Commit)
	if err := context.Cause(runCtx); err != nil && ctx.Err() == nil {
		return res, err
	}
	return res, ctx.Err()
}

type clientResult struct {
	starts  map[uint64]time.Time
	acked   map[uint64]string
	commit  []time.Duration
	retries int
}

// reportProgress calls cfg.Progress once a second until done is closed.
func reportProgress(cfg Config, start time.Time, done <-chan struct{}, committed *atomic.Int64, maxLSN *atomic.Uint64) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastAt := int64(0), start
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		now, n := cfg.Now(), committed.Load()
		rate := float64(n-last) / now.Sub(lastAt).Seconds()
		last, lastAt = n, now
		cfg.Progress(Progress{Elapsed: now.Sub(start), Committed: n, Rate: rate, MaxLSN: maxLSN.Load()})
	}
}

// appendRetrying sends req until it is acknowledged, a permanent error, ctx
// ends or cfg.RetryMax passes. Resending the same producer sequence is safe:
// the LogStore answers a retry of a remembered sequence with the first
// result.
func appendRetrying(ctx context.Context, cfg Config, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, int, error) {
	var resp *logstorepb.AppendResponse
	retries, err := retrying(ctx, cfg, func(ctx context.Context) error {
		var err error
		resp, err = cfg.Appender.Append(ctx, req)
		if err != nil {
			cfg.Logger.Debug("demo: append failed", "producer", req.ProducerId, "seq", req.Sequence, "err", err)
		}
		return err
	})
	return resp, retries, err
}

// retrying calls fn, each attempt bounded by cfg.AppendTimeout, until it
// succeeds, fails permanently (not Retryable), ctx ends or cfg.RetryMax
// passes, with exponential backoff; it returns how many attempts failed
// and were retried. For an Append, and for InitProducer (a retry may
// register twice: the later epoch wins, and nothing was sent under the
// earlier one).
func retrying(ctx context.Context, cfg Config, fn func(ctx context.Context) error) (int, error) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 20 * time.Millisecond
	bo.MaxInterval = time.Second
	bo.MaxElapsedTime = cfg.RetryMax
	retries := 0
	err := backoff.Retry(func() error {
		actx, cancel := context.WithTimeout(ctx, cfg.AppendTimeout)
		defer cancel()
		err := fn(actx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !Retryable(err) {
			return backoff.Permanent(err)
		}
		retries++
		return err
	}, backoff.WithContext(bo, ctx))
	return retries, err
}

// Retryable reports whether an Append error may succeed when resent with the
// same producer sequence: the demo's producers are idempotent, so anything
// apierr.Classify puts at MaybeApplied or below (refused before Raft, or an
// unknown outcome) is resent, and so is an attempt's own deadline. Final
// answers (bad request, TABLE_FULL, a failed condition) are not.
func Retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || apierr.Classify(err) <= apierr.MaybeApplied
}
