package storeconn

import (
	"context"
	"errors"
	"fmt"

	"github.com/cenkalti/backoff/v4"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Policy says how a request may be retried.
type Policy struct {
	// Name names the request in log records.
	Name string
	// Retry is the worst outcome still retried (see apierr.Outcome):
	// NotApplied for a write that must not apply twice, MaybeApplied for
	// an idempotent request or a read, NodeFault or Final for a caller
	// that must keep going.
	Retry apierr.Outcome
	// Leader sends the request to the node believed to lead, and a node
	// that answers it becomes that node when none was known.
	Leader bool
}

// Attempt is one try of a request on node, through ls, within ctx (which
// carries the attempt's deadline).
type Attempt func(ctx context.Context, node int, ls logstorepb.LogStoreClient) error

// Call runs attempt on one node after another until it succeeds, fails
// with an error p does not retry, or ctx ends; it returns the last
// attempt's error, except that when an earlier attempt's outcome was
// unknown (retried under a MaybeApplied policy) and the last one was
// refused before Raft, it returns an UNKNOWN_OUTCOME error naming both
// (the request may have been applied), and when no node could be reached
// before ctx ended, ctx's error wrapping the last (see callErr). A
// NOT_LEADER answer naming another node sends the next attempt there at
// once (twice in a row, when nodes name each other during an election, it
// backs off first); any other retried failure, and every failure with an
// unknown outcome, moves the rotation past the node.
func (c *Conn) Call(ctx context.Context, p Policy, attempt Attempt) error {
	if _, ok := ctx.Deadline(); !ok && c.cfg.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
		defer cancel()
	}
	var b *backoff.ExponentialBackOff // made at the first wait: most calls succeed at once
	redirected := false               // the last attempt followed a NOT_LEADER redirect at once
	var maybe error                   // the first attempt whose outcome is unknown
	for {
		node := c.Pick(p.Leader)
		err := c.attempt(ctx, p, node, attempt)
		if err == nil {
			return nil
		}
		out := apierr.Classify(err)
		if maybe == nil && apierr.AppliedOf(err) != apierr.AppliedNo {
			maybe = err
		}
		if d := apierr.Detail(err); d != nil && d.Code == logstorepb.ErrorCode_NOT_LEADER {
			if to, ok := c.resolve(d.LeaderAddress); ok && to != node {
				c.SetLeader(to)
				if !redirected {
					redirected = true
					continue // go straight to the named leader
				}
			} else {
				c.Failed(node)
			}
			redirected = false
		} else if out <= max(apierr.MaybeApplied, p.Retry) {
			c.Failed(node)
		}
		if out > p.Retry || ctx.Err() != nil {
			return callErr(ctx, maybe, err)
		}
		if b == nil {
			b = c.newBackoff()
		}
		wait := b.NextBackOff()
		c.cfg.Logger.Debug("logstore call failed, trying again",
			"call", p.Name, "node", node, "retry_in", wait, "err", err)
		if sleep(ctx, wait) != nil {
			return callErr(ctx, maybe, err)
		}
	}
}

// callErr is the error of a call that ends with last, stating the call's
// outcome: when an earlier attempt may have committed (maybe; nil: none)
// and last wrote nothing (apierr.AppliedOf), the call may have written.
// Then a refusal about the node or the moment (NotApplied: NOT_LEADER,
// unreachable, …) becomes an UNKNOWN_OUTCOME error naming both, and a
// final refusal keeps its code and detail but states AppliedMaybe. When no
// node could be reached before ctx ended, ctx's error wraps last
// (ErrUnreachable is internal: a caller tests the deadline). Else last.
func callErr(ctx context.Context, maybe, last error) error {
	if maybe != nil && apierr.AppliedOf(last) == apierr.AppliedNo {
		if apierr.Classify(last) == apierr.NotApplied {
			return apierr.Newf(logstorepb.ErrorCode_UNKNOWN_OUTCOME, "outcome unknown: an attempt ended with %v; the last one: %v", maybe, last)
		}
		return apierr.WithApplied(last, apierr.AppliedMaybe)
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(last, ErrUnreachable) {
		return fmt.Errorf("%w: %w", cerr, last)
	}
	return last
}

func (c *Conn) resolve(addr string) (int, bool) {
	if addr == "" || c.cfg.Resolve == nil {
		return 0, false
	}
	return c.cfg.Resolve(addr)
}

func (c *Conn) attempt(ctx context.Context, p Policy, node int, attempt Attempt) error {
	ls, err := c.cfg.Node(ctx, node)
	if err != nil {
		return err
	}
	actx := ctx
	if c.cfg.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, c.cfg.AttemptTimeout)
		defer cancel()
	}
	err = attempt(actx, node, ls)
	if err == nil && p.Leader && ctx.Err() == nil {
		c.setLeaderIfUnknown(node)
	}
	return err
}
