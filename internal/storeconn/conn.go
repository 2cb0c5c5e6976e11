// Package storeconn is the one way this module reaches LogStore nodes, used
// by the client SDK (package client) and the LogPlayer's fetcher alike. It
// owns:
//
//   - the node list and its rotation (Conn.Pick, Conn.Failed): the node
//     believed to lead when a caller wants the leader, else a cursor over
//     the nodes that a failure moves past; a NOT_LEADER answer's leader
//     address is followed at once (Config.Resolve), the Raft leader with
//     the highest term can be probed for (Conn.ProbeLeader);
//   - which failures are retried: apierr.Classify (derived from
//     apierr.AppliedOf, the one answer to "did this write?") against the
//     caller's limit (Policy.Retry), so a write is retried only when it
//     cannot apply twice and an unknown outcome only for an idempotent
//     request; a call's error states the call's outcome (callErr);
//   - backoff between attempts (cenkalti/backoff/v4, exponential, capped at
//     Config.MaxBackoff), reset after progress;
//   - unary calls (Conn.Call) and server streams reopened on another node
//     after a failure (Stream), and following the log (LogReader) from a
//     Cursor that moves only past what a response covered
//     (read_through_lsn), so a reopened stream has no gap and no duplicate;
//     a response that is not the continuation of the cursor is a
//     *ContinuityError.
//
// A node is an index into the list (0, 1, …; Conn.Add appends one); the
// caller's Config.Node turns an index into a ready LogStoreClient.
//
// Goroutines: none. Everything runs on the caller's goroutine; a Stream's
// receive is cancelled by context.AfterFunc when the caller's context ends
// during it. Bounds: every attempt has Config.AttemptTimeout, every call
// Config.CallTimeout when its context has no deadline, every wait the
// backoff cap; a leader probe asks each node for at most ProbeTimeout.
package storeconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// ErrUnreachable wraps the error of an attempt that sent nothing because
// the node could not be reached. It is marked apierr.NotSent (AppliedOf:
// AppliedNo), so it is retried like NotApplied.
var ErrUnreachable = apierr.NotSent(errors.New("storeconn: node unreachable"))

// errEmptyStream is the end of a stream that ended cleanly without
// sending anything (before the end of its range): not a failure of the
// read, which is reopened whatever its policy (Stream.retry).
var errEmptyStream = errors.New("storeconn: stream ended without sending anything")

// ProbeTimeout bounds each Status call of ProbeLeader.
const ProbeTimeout = time.Second

// Config configures a Conn.
type Config struct {
	// Nodes is how many nodes are known at the start (at least one).
	Nodes int
	// Node returns the client of node i, ready to send on: an error
	// wrapping ErrUnreachable when nothing could be sent (any other error
	// is classified as the attempt's). Required.
	Node func(ctx context.Context, i int) (logstorepb.LogStoreClient, error)
	// Resolve maps the leader address of a NOT_LEADER answer to a node
	// (adding one if need be); nil, or false, ignores the hint (the next
	// node is tried).
	Resolve func(addr string) (node int, ok bool)
	// Spread moves the cursor on at every pick that is not of the leader,
	// so that successive streams and leaderless attempts go round the
	// nodes; without it the cursor stays on a node until it fails.
	Spread bool
	// InitialBackoff is the first wait between attempts, MaxBackoff the
	// cap of the waits after it (both > 0).
	InitialBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt of a Call (0: none).
	AttemptTimeout time.Duration
	// CallTimeout is the deadline of a Call whose context has none (0:
	// none: the call retries until its context ends).
	CallTimeout time.Duration
	// Logger gets a record per retried failure: a stream's at
	// FailureLevel, a call's at Debug (nil: discard).
	Logger       *slog.Logger
	FailureLevel slog.Level
}

func (c *Config) validate() error {
	if c.Nodes <= 0 {
		return errors.New("storeconn: no nodes")
	}
	if c.Node == nil {
		return errors.New("storeconn: Config.Node is nil")
	}
	if c.InitialBackoff <= 0 || c.MaxBackoff <= 0 {
		return fmt.Errorf("storeconn: bad backoff bounds %v..%v", c.InitialBackoff, c.MaxBackoff)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Conn is a set of LogStore nodes and the rules for reaching them. It is
// safe for concurrent use; each Stream has its own position.
type Conn struct {
	cfg Config
	mu  struct {
		sync.Mutex
		n      int // nodes 0..n-1
		next   int // the cursor: the node to try when the leader is not wanted or unknown
		leader int // the node believed to lead; -1 unknown
	}
}

// New validates cfg and returns a Conn.
func New(cfg Config) (*Conn, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Conn{cfg: cfg}
	c.mu.n, c.mu.leader = cfg.Nodes, -1
	return c, nil
}

// Add appends a node and returns its index.
func (c *Conn) Add() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.n++
	return c.mu.n - 1
}

// Len returns the number of nodes.
func (c *Conn) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.n
}

// Pick returns the node to try: the leader when leader is set and one is
// known, else the node at the cursor (moving the cursor on with
// Config.Spread).
func (c *Conn) Pick(leader bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if leader && c.mu.leader >= 0 {
		return c.mu.leader
	}
	i := c.mu.next % c.mu.n
	if c.cfg.Spread {
		c.mu.next++
	}
	return i
}

// Failed forgets node as the leader and moves the cursor past it when it
// is at it (several callers that saw the same node fail move it once).
func (c *Conn) Failed(node int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.leader == node {
		c.mu.leader = -1
	}
	if c.mu.next%c.mu.n == node {
		c.mu.next++
	}
}

// SetLeader records node as the leader.
func (c *Conn) SetLeader(node int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.leader = node
}

// Leader returns the node believed to lead, or -1.
func (c *Conn) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.leader
}

func (c *Conn) setLeaderIfUnknown(node int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.leader < 0 {
		c.mu.leader = node
	}
}

// ProbeLeader asks every node for its Status and records as the leader the
// one that says it leads with the highest Raft term (an old leader cut off
// keeps claiming until its lease ends). The leader applies a commit first,
// so reading from it is sooner; any node is correct. With one node, or when
// none claims to lead, nothing changes.
func (c *Conn) ProbeLeader(ctx context.Context) {
	n := c.Len()
	if n == 1 {
		return
	}
	best, bestTerm := -1, uint64(0)
	for i := range n {
		pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
		st, err := c.status(pctx, i)
		cancel()
		if err == nil && st.Role == "leader" && (best < 0 || st.RaftTerm > bestTerm) {
			best, bestTerm = i, st.RaftTerm
		}
	}
	if best >= 0 {
		c.SetLeader(best)
	}
}

// status returns node's status (one attempt).
func (c *Conn) status(ctx context.Context, node int) (*logstorepb.StatusResponse, error) {
	ls, err := c.cfg.Node(ctx, node)
	if err != nil {
		return nil, err
	}
	return ls.Status(ctx, &logstorepb.StatusRequest{})
}

// Heads calls fn with the head LSN of every node but skip that answers
// Status within ProbeTimeout, until fn returns true.
func (c *Conn) Heads(ctx context.Context, skip int, fn func(node int, head types.LSN) bool) {
	for i := range c.Len() {
		if i == skip {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
		st, err := c.status(pctx, i)
		cancel()
		if err == nil && fn(i, types.LSN(st.HeadLsn)) {
			return
		}
	}
}

func (c *Conn) newBackoff() *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(c.cfg.InitialBackoff),
		backoff.WithMaxInterval(c.cfg.MaxBackoff),
		backoff.WithMaxElapsedTime(0),
	)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready waits up to timeout for cc to be usable. An error (wrapping
// ErrUnreachable) means nothing could have been sent on it.
func Ready(ctx context.Context, cc *grpc.ClientConn, timeout time.Duration) error {
	if cc.GetState() == connectivity.Ready {
		return nil // the common case: no timer, no context
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cc.Connect()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			cc.ResetConnectBackoff()
			return fmt.Errorf("%w: %s (%v)", ErrUnreachable, cc.Target(), s)
		}
		if !cc.WaitForStateChange(ctx, s) {
			return fmt.Errorf("%w: %s (%v after %v)", ErrUnreachable, cc.Target(), s, timeout)
		}
	}
}
