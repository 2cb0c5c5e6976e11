package storeconn

import (
	"context"
	"errors"
	"io"

	"github.com/cenkalti/backoff/v4"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// StreamPolicy says where a Stream reads and which failures it survives.
type StreamPolicy struct {
	// Name names the stream in log records.
	Name string
	// Retry is the worst outcome after which the stream is reopened on
	// another node (see apierr.Outcome). Below retention is retention of
	// one node (each deletes on its own schedule): the stream asks every
	// other node for the same position, at once, and returns the error
	// only when all of them answered it.
	Retry apierr.Outcome
	// Leader reads from the node believed to lead.
	Leader bool
	// ProbeLeader asks every node who leads before each open
	// (Conn.ProbeLeader); with Leader, the stream follows the leader.
	ProbeLeader bool
}

// Opener opens a server stream on node (through ls) from the reader's
// current position; the stream lives as long as ctx. It returns the
// stream's receive function.
type Opener[R any] func(ctx context.Context, node int, ls logstorepb.LogStoreClient) (recv func() (R, error), err error)

// Recv turns what a gRPC stream call returned into an Opener's results:
// return storeconn.Recv(ls.Read(ctx, req)).
func Recv[R any, S interface{ Recv() (R, error) }](s S, err error) (func() (R, error), error) {
	if err != nil {
		return nil, err
	}
	return s.Recv, nil
}

// A Stream follows one server stream at a time over a Conn's nodes,
// reopening it (with backoff) on another node after a failure. It runs on
// its caller's goroutine and is not safe for concurrent use; Close it when
// done.
type Stream[R any] struct {
	c      *Conn
	p      StreamPolicy
	open   Opener[R]
	b      *backoff.ExponentialBackOff
	node   int
	recv   func() (R, error) // the open stream's; nil when none
	cancel context.CancelFunc
	sent   bool       // the open stream delivered a response
	where  func() any // the position, for log records; may be nil
	// below holds the nodes that answered below retention or
	// UNKNOWN_TOPIC (unknowntopic.go) since the last response (the
	// position has not moved since).
	below map[int]bool
	// preferLeader: the next open asks the leader (unknowntopic.go).
	preferLeader bool
}

// NewStream returns a Stream that opens its server streams with open; it
// connects on the first Next.
func NewStream[R any](c *Conn, p StreamPolicy, open Opener[R]) *Stream[R] {
	return &Stream[R]{c: c, p: p, open: open, b: c.newBackoff()}
}

// Node returns the node of the open (or last) stream.
func (s *Stream[R]) Node() int { return s.node }

// Next returns the next response, opening a stream when none is open. It
// returns io.EOF when a stream that sent something ended cleanly (the
// caller knows whether it is done; the next call opens a new stream), a
// failure p does not retry (below retention included), or ctx's error
// (the open stream is kept: calling Next again continues it). A failure p
// retries, or a stream that ended without sending anything, closes the
// stream, moves the rotation past its node and waits a backoff.
func (s *Stream[R]) Next(ctx context.Context) (R, error) {
	var zero R
	for {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		if s.recv == nil {
			if err := s.connect(ctx); err != nil {
				if err := s.retry(ctx, err); err != nil {
					return zero, err
				}
				continue
			}
		}
		stop := context.AfterFunc(ctx, s.cancel)
		resp, err := s.recv()
		stop()
		if err == nil {
			s.sent = true
			clear(s.below)
			s.b.Reset()
			return resp, nil
		}
		sent := s.sent
		s.Close()
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		if errors.Is(err, io.EOF) {
			if sent {
				return zero, io.EOF
			}
			err = errEmptyStream
		}
		if err := s.retry(ctx, err); err != nil {
			return zero, err
		}
	}
}

func (s *Stream[R]) connect(ctx context.Context) error {
	if s.p.ProbeLeader {
		s.c.ProbeLeader(ctx)
	}
	s.node = s.c.Pick(s.p.Leader || s.preferLeader)
	s.preferLeader = false
	if n := s.c.Len(); s.below[s.node] {
		// The leader (or the cursor) already said below retention: ask a
		// node that has not.
		for j := 1; j < n; j++ {
			if i := (s.node + j) % n; !s.below[i] {
				s.node = i
				break
			}
		}
	}
	ls, err := s.c.cfg.Node(ctx, s.node)
	if err != nil {
		return err
	}
	// The stream outlives this call (the next Next continues it): it ends
	// with Close, or when a receive is cancelled with the caller's ctx.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	recv, err := s.open(sctx, s.node, ls)
	if err != nil {
		cancel()
		return err
	}
	s.recv, s.cancel, s.sent = recv, cancel, false
	return nil
}

// retry returns err when s does not survive it; otherwise it moves the
// rotation past the node and waits one backoff interval (or returns ctx's
// error).
func (s *Stream[R]) retry(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if isUnknownTopic(err) {
		if s.unknownTopic(ctx) {
			return err
		}
		return nil
	}
	if _, below := apierr.BelowRetention(err); below {
		if s.below == nil {
			s.below = map[int]bool{}
		}
		s.below[s.node] = true
		if len(s.below) >= s.c.Len() {
			return err
		}
		s.c.Failed(s.node)
		return nil
	}
	if !errors.Is(err, errEmptyStream) && apierr.Classify(err) > s.p.Retry {
		return err
	}
	s.c.Failed(s.node)
	wait := s.b.NextBackOff()
	var where any
	if s.where != nil {
		where = s.where()
	}
	s.c.cfg.Logger.Log(ctx, s.c.cfg.FailureLevel, "read stream failed; resuming on another node",
		"stream", s.p.Name, "node", s.node, "from", where, "retry_in", wait, "err", err)
	return sleep(ctx, wait)
}

// Close ends the open stream, if any.
func (s *Stream[R]) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.recv, s.cancel = nil, nil
}
