// Package fetcher is the LogPlayer's side of the LogStore (docs/DESIGN.md, "fetcher"): the
// main stream that reads the whole log forever, bounded recovery streams that
// read a range for one returning target, and the few unary calls the
// LogPlayer needs (NextEpoch, ReportConsumer, Status).
//
// Every call survives LogStore node failures: the Fetcher holds one client
// per node and reaches them through internal/storeconn (the access layer it
// shares with package client): when a call or a stream fails it moves on to
// the next node with exponential backoff (cenkalti/backoff/v4, capped), and
// a stream resumes from the LSN after the last read_through_lsn, so the
// caller sees no gap and no duplicate across reconnects. The main stream
// follows the Raft leader (storeconn.Conn.ProbeLeader).
//
// Follow and ReadRange run in the caller's goroutine and call the handler
// inline for each transaction (so a slow handler is back-pressure on the
// gRPC stream, never a growing buffer).
//
// Invariants, checked on every received transaction (a violation is a
// LogStore bug and panics with the numbers):
//   - main stream (Follow): LSNs are exactly from, from+1, from+2, …
//   - recovery stream (ReadRange): LSNs strictly increase inside (after, to],
//     and read_through_lsn never lies below a transaction already sent.
//
// Goroutines: the main stream's stall watchdog (one per open main Read
// stream, see Config.StallTimeout) probes the other nodes' heads when the
// stream has been silent; it ends with its stream.
package fetcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/storeconn"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// ErrBelowRetention is returned (wrapped in a *BelowRetentionError) when the
// LogStore no longer holds the first LSN a stream needs.
var ErrBelowRetention = errors.New("fetcher: LSN below LogStore retention")

// ErrNoNodes is returned by New when Config.Nodes is empty.
var ErrNoNodes = errors.New("fetcher: no LogStore nodes configured")

// BelowRetentionError says which LSN was wanted and the oldest one retained.
type BelowRetentionError struct {
	From   types.LSN // first LSN the stream asked for
	Oldest types.LSN // oldest LSN the LogStore still holds
}

func (e *BelowRetentionError) Error() string {
	return fmt.Sprintf("fetcher: lsn %d is below LogStore retention (oldest retained %d)", e.From, e.Oldest)
}

// Unwrap makes errors.Is(err, ErrBelowRetention) true.
func (e *BelowRetentionError) Unwrap() error { return ErrBelowRetention }

// Defaults for Config fields left zero.
const (
	// DefaultRetryInitial is the first reconnect delay: short, a new leader is
	// usually elected within a second.
	DefaultRetryInitial = 20 * time.Millisecond
	// DefaultRetryMax caps the reconnect delay so a returning LogStore is
	// noticed within seconds.
	DefaultRetryMax = 2 * time.Second
	// DefaultCallTimeout is the deadline of one unary call attempt.
	DefaultCallTimeout = 5 * time.Second
	// DefaultStallTimeout: a main stream silent this long is checked
	// against the other nodes' heads (an idle log is silent too, so this
	// only costs a few Status calls per period on an idle cluster).
	DefaultStallTimeout = 5 * time.Second
)

// Config configures a Fetcher.
type Config struct {
	// Nodes holds one client per LogStore node (any order). Required.
	Nodes []logstorepb.LogStoreClient
	// MaxBatch bounds transactions per Read response; 0 lets the server pick.
	MaxBatch uint32
	// RetryInitial and RetryMax bound the reconnect backoff.
	RetryInitial time.Duration
	RetryMax     time.Duration
	// CallTimeout is the deadline of one attempt of a unary call.
	CallTimeout time.Duration
	// StallTimeout: when the main stream received nothing for this long
	// and another node's head holds the LSN it waits for, the stream is
	// moved (a partitioned follower, or a connection that hangs without
	// an error). Negative disables the check.
	StallTimeout time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the fetcher's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

func (c *Config) validate() error {
	if len(c.Nodes) == 0 {
		return ErrNoNodes
	}
	for i, n := range c.Nodes {
		if n == nil {
			return fmt.Errorf("fetcher: node %d is nil", i)
		}
	}
	if c.RetryInitial == 0 {
		c.RetryInitial = DefaultRetryInitial
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.RetryInitial < 0 || c.RetryMax < c.RetryInitial {
		return fmt.Errorf("fetcher: bad retry bounds %v..%v", c.RetryInitial, c.RetryMax)
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.CallTimeout < 0 {
		return fmt.Errorf("fetcher: negative call timeout %v", c.CallTimeout)
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Fetcher reads from a LogStore cluster. Its methods are safe for concurrent
// use; each stream keeps its own position.
type Fetcher struct {
	cfg     Config
	sc      *storeconn.Conn // node rotation, retry rules, backoff
	metrics *metrics
}

// New validates cfg and returns a Fetcher.
func New(cfg Config) (*Fetcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	f := &Fetcher{cfg: cfg, metrics: m}
	f.sc, err = storeconn.New(storeconn.Config{
		Nodes: len(cfg.Nodes),
		Node: func(_ context.Context, i int) (logstorepb.LogStoreClient, error) {
			return f.cfg.Nodes[i], nil
		},
		InitialBackoff: cfg.RetryInitial, MaxBackoff: cfg.RetryMax,
		AttemptTimeout: cfg.CallTimeout,
		Logger:         cfg.Logger, FailureLevel: slog.LevelWarn,
	})
	if err != nil {
		return nil, fmt.Errorf("fetcher: %w", err)
	}
	return f, nil
}

// The fetcher's retry policies (see apierr.Outcome): the LogPlayer must
// keep going, so a unary call is retried on another node after anything
// but an answer about the request itself, and a stream after anything but
// below retention. NextEpoch and ReportConsumer are harmless twice (a
// retry may skip an epoch, which keeps "higher than every earlier one").
var (
	leaderCallPolicy = storeconn.Policy{Retry: apierr.NodeFault, Leader: true}
	anyCallPolicy    = storeconn.Policy{Retry: apierr.NodeFault}
)

// unary runs call with p, and says which call failed.
func (f *Fetcher) unary(ctx context.Context, name string, p storeconn.Policy, call func(ctx context.Context, c logstorepb.LogStoreClient) error) error {
	p.Name = name
	err := f.sc.Call(ctx, p, func(ctx context.Context, _ int, c logstorepb.LogStoreClient) error { return call(ctx, c) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("fetcher: %s: %w (last error: %v)", name, ctx.Err(), err)
	}
	return fmt.Errorf("fetcher: %s: %w", name, err)
}

// NextEpoch commits and returns a new LogPlayer epoch, higher than every
// earlier one.
func (f *Fetcher) NextEpoch(ctx context.Context) (types.Epoch, error) {
	var epoch types.Epoch
	err := f.unary(ctx, "NextEpoch", leaderCallPolicy, func(ctx context.Context, c logstorepb.LogStoreClient) error {
		resp, err := c.NextEpoch(ctx, &logstorepb.NextEpochRequest{})
		if err != nil {
			return err
		}
		epoch = types.Epoch(resp.Epoch)
		return nil
	})
	if err == nil && epoch == 0 {
		return 0, errors.New("fetcher: NextEpoch returned epoch 0")
	}
	return epoch, err
}

// ReportConsumer records consumer's durable acked LSN in the LogStore (the
// retention floor), or removes the consumer.
func (f *Fetcher) ReportConsumer(ctx context.Context, consumer string, acked types.LSN, remove bool) error {
	return f.unary(ctx, "ReportConsumer", leaderCallPolicy, func(ctx context.Context, c logstorepb.LogStoreClient) error {
		_, err := c.ReportConsumer(ctx, &logstorepb.ReportConsumerRequest{Consumer: consumer, AckedLsn: uint64(acked), Remove: remove})
		return err
	})
}

// MaxHead returns the highest head LSN any node reports, each asked once
// (storeconn.ProbeTimeout each); ok is false when none answered. A head is
// what a node has applied, so committed: the highest is the log's head as
// far as the reachable nodes know it, where one node's Status may come
// from a follower that lags.
func (f *Fetcher) MaxHead(ctx context.Context) (head types.LSN, ok bool) {
	f.sc.Heads(ctx, -1, func(_ int, h types.LSN) bool {
		head, ok = max(head, h), true
		return false
	})
	return head, ok
}

// Status returns the status of whichever node answers first.
func (f *Fetcher) Status(ctx context.Context) (*logstorepb.StatusResponse, error) {
	var out *logstorepb.StatusResponse
	err := f.unary(ctx, "Status", anyCallPolicy, func(ctx context.Context, c logstorepb.LogStoreClient) error {
		resp, err := c.Status(ctx, &logstorepb.StatusRequest{})
		out = resp
		return err
	})
	return out, err
}
