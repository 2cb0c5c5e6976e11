package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// Cluster is what a session needs of the LogStore (a client.Client).
type Cluster interface {
	Appender
	LogReader
	LeaderStatus(ctx context.Context) (*logstorepb.StatusResponse, error)
}

// SessionConfig configures Session: the workload against a running cluster
// and the check of what it delivered.
type SessionConfig struct {
	Cluster Cluster
	// Shards maps each shard target id (shard-0 .. shard-N-1, N >= 2) to
	// a client of its Shard read service.
	Shards map[string]shardpb.ShardClient
	// Recorder feeds the check (see CheckConfig); nil: a new one, and every
	// shard is audited by position. Recorded lists the targets whose store
	// Recorder wraps (target id -> topics).
	Recorder *Recorder
	Recorded map[string][]string
	// Lag, when set, returns the LogPlayer's lag in LSNs per target for the
	// progress line.
	Lag func() map[string]uint64
	// Duration is how long the workload appends, with Clients producers;
	// Seed feeds it (0: from the clock).
	Duration time.Duration
	Clients  int
	Seed     uint64
	// CatchUp bounds the wait for delivery before the check.
	CatchUp time.Duration
	// StatusTimeout bounds one LeaderStatus call (default
	// DefaultStatusTimeout).
	StatusTimeout time.Duration
	// Out receives the session's status and progress lines (nil: none).
	Out    io.Writer
	Logger *slog.Logger
}

// DefaultStatusTimeout is SessionConfig.StatusTimeout's default.
const DefaultStatusTimeout = 10 * time.Second

// ErrInterrupted is returned by Session when ctx ended during the workload.
var ErrInterrupted = errors.New("demo interrupted")

// checkReadMax bounds the part of a check after the catch-up wait: reading
// the log back and scanning the shards.
const checkReadMax = 2 * time.Minute

// Session runs one demo: it watches every shard's applied LSN, runs the
// workload from the leader's head, waits for delivery and checks the
// shards' states and the deliveries against the log read back. The report
// says whether anything is missing or duplicated (Report.OK).
//
// Goroutines: Run's, and one WatchApplied per shard, which Session stops
// and waits for before it returns.
func Session(ctx context.Context, cfg SessionConfig) (*Report, error) {
	if cfg.Recorder == nil {
		cfg.Recorder = NewRecorder(nil)
	}
	if cfg.StatusTimeout == 0 {
		cfg.StatusTimeout = DefaultStatusTimeout
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	shards := cfg.Shards
	wctx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer stopWatch()
	for id, c := range shards {
		watchers.Go(func() { WatchApplied(wctx, cfg.Recorder, id, c) })
	}

	after, err := head(ctx, cfg)
	if err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	run := NewRunID(seed)
	fmt.Fprintf(cfg.Out, "demo: run %s, %d producers for %v, seed %d, from LSN %d\n", run, cfg.Clients, cfg.Duration, seed, after+1)
	res, err := Run(ctx, Config{
		Appender: cfg.Cluster, Clients: cfg.Clients, Shards: len(shards), Duration: cfg.Duration,
		Run: run, Seed: seed, Logger: cfg.Logger,
		Progress: func(p Progress) {
			var lag map[string]uint64
			if cfg.Lag != nil {
				lag = cfg.Lag()
			}
			fmt.Fprintln(cfg.Out, ProgressLine(p, cfg.Recorder.Progress(), lag))
		},
	})
	if ctx.Err() != nil {
		return nil, ErrInterrupted
	}
	if err != nil {
		return nil, fmt.Errorf("demo workload: %w", err)
	}
	through, err := head(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if through < res.MaxLSN {
		return nil, fmt.Errorf("the leader's head LSN %d is below the acknowledged LSN %d", through, res.MaxLSN)
	}
	fmt.Fprintf(cfg.Out, "demo: %d transactions committed; waiting for delivery (at most %v), then checking\n", res.Committed, cfg.CatchUp)
	cctx, cancel := context.WithTimeout(ctx, cfg.CatchUp+checkReadMax)
	defer cancel()
	rep, err := Check(cctx, CheckConfig{
		Log: cfg.Cluster, After: after, Through: through, Shards: shards,
		Recorder: cfg.Recorder, Recorded: cfg.Recorded, CatchUp: cfg.CatchUp,
	}, res)
	if err != nil {
		return nil, fmt.Errorf("demo check: %w", err)
	}
	return rep, nil
}

// head is the leader's head LSN.
func head(ctx context.Context, cfg SessionConfig) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.StatusTimeout)
	defer cancel()
	st, err := cfg.Cluster.LeaderStatus(ctx)
	if err != nil {
		return 0, fmt.Errorf("LogStore status: %w", err)
	}
	return st.HeadLsn, nil
}
