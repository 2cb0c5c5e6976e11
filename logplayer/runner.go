package logplayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/dispatcher"
	"github.com/logplayer/logplayer/fetcher"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// Why a stream ended, when the LogPlayer ended it.
var (
	errSlow          = errors.New("target too slow: its queue overflowed, recovering from the LogStore")
	errHelloTimeout  = errors.New("no HelloAck within the hello timeout")
	errProtocol      = errors.New("target protocol violation")
	errTargetEnded   = errors.New("target ended the stream")
	errStaleConn     = errors.New("stream term is no longer the target's term")
	errRecoveryStale = errors.New("recovery fetcher is stale")
	errBlocked       = errors.New("target cannot be served until an operator acts")
	errLeaseLapsed   = errors.New("the group lease lapsed: not delivering until it is renewed")
)

// failure classifies why a session ended: it decides the next delay.
type failure uint8

const (
	failTransient failure = iota // reconnect with backoff
	failSlow                     // reconnect after RetryInitial, no backoff: the target is up, just behind
	failPermanent                // reconnect after PermanentRetry: an operator must act
	failFenced                   // a newer LogPlayer owns the target: this one must stop
)

// classify maps a session's error to a failure kind: STALE_EPOCH fences
// (package target documents the refusals); otherwise the one retry
// classification of errors, apierr.Classify (derived from
// apierr.AppliedOf): an answer about the request itself (Final: a
// delivery the target can never apply, a wrong target or protocol,
// refused credentials) is answered the same on the next session, so it
// waits PermanentRetry and shows the target blocked; anything about the
// target or the connection is transient.
func classify(err error) failure {
	switch {
	case errors.Is(err, errSlow):
		return failSlow
	case errors.Is(err, errBlocked):
		return failPermanent
	case apierr.CodeOf(err) == logstorepb.ErrorCode_STALE_EPOCH:
		return failFenced
	case apierr.Classify(err) == apierr.Final:
		return failPermanent
	}
	return failTransient
}

// describeErr is a session's error as status shows it: prefixed with its
// typed code (logstorepb.ErrorCode) when it carries one.
func describeErr(err error) string {
	if code := apierr.CodeOf(err); code != logstorepb.ErrorCode_ERROR_CODE_UNSPECIFIED {
		return code.String() + ": " + err.Error()
	}
	return err.Error()
}

// quietFailures: while a target stays unreachable, one reconnect failure in
// this many is logged at warn level (the others at debug).
const quietFailures = 20

// handshake is a target's answer at LogPlayer start.
type handshake struct {
	id      string
	applied types.LSN
}

// runner delivers to one target: it owns the target's client connection and
// runs its sessions (one Deliver stream each) one after another.
type runner struct {
	p      *Player
	cfg    TargetConfig
	cc     *grpc.ClientConn
	client targetpb.TargetClient
	m      *targetMetrics

	// wake (capacity 1, coalescing) tells the sender that the target's
	// queue may have something: fed by Dispatch, Progress, the recovery
	// fetcher and FetchingCompleted.
	wake chan struct{}
	// room (capacity 1, coalescing) tells a recovery fetcher waiting on a
	// full catchup queue that the sender took a batch.
	room chan struct{}

	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	ackLogTime atomic.Int64 // log time of the newest acked delivery (0: none yet)
	startedAt  time.Time

	mu struct {
		sync.Mutex
		conn        *conn  // the live stream, nil between sessions
		handshaken  bool   // a handshake succeeded at least once
		lastErr     string // why the last session ended
		blocked     bool   // the last session ended permanently
		incarnation string
	}
}

// run is the runner goroutine: sessions with backoff until ctx ends or the
// target fences this LogPlayer. hs, when not nil, receives the first
// handshake (LogPlayer start).
func (r *runner) run(ctx context.Context, hs chan<- handshake) {
	defer close(r.done)
	defer r.cc.Close()
	log := r.p.log.With("target", r.cfg.ID)
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(r.p.cfg.RetryInitial),
		backoff.WithMaxInterval(r.p.cfg.RetryMax),
		backoff.WithMaxElapsedTime(0),
	)
	failures := 0 // consecutive sessions that acked nothing
	for {
		acked, err := r.session(ctx, &hs)
		if ctx.Err() != nil {
			return
		}
		kind := classify(err)
		if code := apierr.CodeOf(err); code != logstorepb.ErrorCode_ERROR_CODE_UNSPECIFIED {
			r.m.refusals.WithLabelValues(code.String()).Inc()
		}
		r.mu.Lock()
		r.mu.lastErr = describeErr(err)
		r.mu.blocked = kind == failPermanent
		r.mu.Unlock()
		var wait time.Duration
		switch kind {
		case failFenced:
			if r.p.grp != nil {
				// Another member holds a newer token: stop this target
				// only; the next heartbeat's assignment moves it away or
				// gives it a new token (a new runner).
				log.Warn("fenced: another group member holds a newer token for this target; not delivering to it",
					"epoch", r.epoch(), "err", err)
				r.mu.Lock()
				r.mu.blocked = true
				r.mu.Unlock()
				return
			}
			log.Error("fenced: a LogPlayer with a newer epoch owns this target; stopping", "epoch", r.p.Epoch(), "err", err)
			r.p.fail(fmt.Errorf("%w: target %s: %v", ErrFenced, r.cfg.ID, err))
			return
		case failSlow:
			bo.Reset()
			wait = r.p.cfg.RetryInitial
			log.Info("reconnecting slow target", "err", err)
		case failPermanent:
			wait = r.p.cfg.PermanentRetry
			log.Error("target refused permanently: not delivering to it until an operator acts", "retry_in", wait, "err", err)
		default:
			if acked {
				bo.Reset()
				failures = 0
			}
			failures++
			wait = bo.NextBackOff()
			// Loud when a working target fails, quiet while it stays down.
			level := slog.LevelDebug
			if failures == 1 || failures%quietFailures == 0 {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "target stream ended, reconnecting", "retry_in", wait, "failures", failures, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// session runs one Deliver stream: Hello, HelloAck, Return, then the sender
// in this goroutine, the receiver and (if the target is behind) the recovery
// fetcher in their own, until one of them fails or ctx ends. acked says
// whether the target acked anything (the stream did useful work).
func (r *runner) session(ctx context.Context, hs *chan<- handshake) (acked bool, err error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stream, err := r.client.Deliver(sctx)
	if err != nil {
		return false, err
	}
	ack, err := r.hello(sctx, stream, cancel)
	if apierr.CodeOf(err) == logstorepb.ErrorCode_OTHER_LOG {
		err = fmt.Errorf("%w: %w", errBlocked, err) // an operator re-seeds or resets the target
	}
	if err != nil {
		return false, err
	}
	if err := r.p.checkNotAhead(sctx, r.cfg.ID, types.LSN(ack.AppliedLsn)); err != nil {
		return false, err
	}
	if *hs != nil {
		*hs <- handshake{id: r.cfg.ID, applied: types.LSN(ack.AppliedLsn)} // capacity: one per configured target
		*hs = nil
	}
	select {
	case <-r.p.ready:
	case <-sctx.Done():
		return false, context.Cause(sctx)
	}
	d := r.p.dispatcher()
	rec, err := d.Return(r.cfg.ID, types.LSN(ack.AppliedLsn))
	if err != nil {
		return false, err
	}
	c := newConn(rec.Term, stream, cancel)
	r.mu.Lock()
	r.mu.conn = c
	r.mu.handshaken = true
	r.mu.blocked = false // the target answered again: an operator acted
	r.mu.incarnation = ack.IncarnationId
	r.mu.Unlock()
	// Dispatch may have suspended the target as slow between Return and the
	// line above, when kickSlow still found no conn to end. Now that the conn
	// is published, any later suspension kicks it; check for an earlier one.
	r.kickIfSuspended(d, c)
	if !rec.Empty {
		r.m.recoveryStarts.Inc()
	}

	var wg sync.WaitGroup
	var gotAck atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.receive(c, d, &gotAck)
	}()
	if !rec.Empty {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.recover(sctx, c, d, rec)
		}()
	}
	err = r.send(sctx, c, d)
	cancel(err)
	if st, ok := d.Stats(r.cfg.ID); ok && st.State != targetqueue.Suspended {
		d.Suspend(r.cfg.ID) // (a slow target was suspended by Dispatch already)
	}
	wg.Wait()
	r.mu.Lock()
	r.mu.conn = nil
	r.mu.Unlock()
	return gotAck.Load(), context.Cause(sctx)
}

// epoch is the Hello epoch of this target's streams: its own (a group
// member's fencing token) or the Player's.
func (r *runner) epoch() types.Epoch {
	if r.cfg.Epoch != 0 {
		return r.cfg.Epoch
	}
	return r.p.Epoch()
}

// hello sends the Hello and waits (at most HelloTimeout) for the HelloAck.
func (r *runner) hello(ctx context.Context, stream targetpb.Target_DeliverClient, cancel context.CancelCauseFunc) (*targetpb.HelloAck, error) {
	t := time.AfterFunc(r.p.cfg.HelloTimeout, func() { cancel(errHelloTimeout) })
	defer t.Stop()
	if !r.p.leaseHeld() {
		return nil, errLeaseLapsed
	}
	log := r.p.helloLog()
	req := &targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Hello{Hello: &targetpb.Hello{
		PlayerId:        r.p.cfg.PlayerID,
		Epoch:           uint64(r.epoch()),
		TargetId:        r.cfg.ID,
		ProtocolVersion: targetpb.ProtocolVersion_PROTOCOL_VERSION_1,
		Session:         uint64(r.p.nextSession()),
		LogClusterId:    log.clusterID,
		LogIncarnation:  log.incarnation,
	}}}
	err := stream.Send(req)
	var resp *targetpb.DeliverResponse
	if err == nil || err == io.EOF {
		resp, err = stream.Recv() // after a failed Send, Recv returns the stream's status
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			return nil, cause
		}
		return nil, err
	}
	ack := resp.GetHelloAck()
	if ack == nil {
		return nil, fmt.Errorf("%w: first answer is not a HelloAck", errProtocol)
	}
	if ack.ProtocolVersion != targetpb.ProtocolVersion_PROTOCOL_VERSION_1 {
		return nil, fmt.Errorf("%w: %w: target speaks protocol %v", errBlocked, errProtocol, ack.ProtocolVersion)
	}
	return ack, nil
}

// send is the sender: the only caller of stream.Send after the Hello. It
// takes batches of this conn's term while the window has room and returns
// the reason the stream ended.
func (r *runner) send(ctx context.Context, c *conn, d *dispatcher.Dispatcher) error {
	cfg := &r.p.cfg
	for {
		ok, budget := c.hasRoom(cfg.WindowBatches, cfg.WindowBytes)
		if !ok {
			select {
			case <-c.released:
				continue
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		msgs, ok := d.NextBatchForTerm(r.cfg.ID, c.term, cfg.MaxBatchCount, min(cfg.MaxBatchBytes, budget))
		if !ok {
			return errStaleConn
		}
		if len(msgs) == 0 {
			select {
			case <-r.wake:
				continue
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if !r.p.leaseHeld() {
			// The batch stays unsent: the stream ends, the target is
			// suspended and whoever delivers next recovers it.
			return errLeaseLapsed
		}
		signal(r.room)
		c.sent(msgs)
		if err := c.stream.Send(batchOf(msgs)); err != nil {
			if err != io.EOF {
				c.cancel(err)
			}
			<-ctx.Done() // io.EOF: the receiver reads the stream's status and ends it
			return context.Cause(ctx)
		}
	}
}

// receive is the receiver goroutine: the only caller of stream.Recv after
// the HelloAck. Acks are cumulative: each one releases the window and
// advances the dispatcher's last ack for this conn's term.
func (r *runner) receive(c *conn, d *dispatcher.Dispatcher, gotAck *atomic.Bool) {
	for {
		resp, err := c.stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errTargetEnded
			}
			c.cancel(err)
			return
		}
		a := resp.GetAck()
		if a == nil {
			c.cancel(fmt.Errorf("%w: message %T after the handshake", errProtocol, resp.GetKind()))
			return
		}
		lsn := types.LSN(a.AppliedLsn)
		if err := d.AckTerm(r.cfg.ID, c.term, lsn); err != nil {
			if errors.Is(err, dispatcher.ErrBogusAck) {
				r.m.bogusAcks.Inc()
				r.p.log.Error("target acked what it was never sent: resyncing", "target", r.cfg.ID, "lsn", lsn, "err", err)
			}
			c.cancel(err)
			return
		}
		gotAck.Store(true)
		now := r.p.cfg.Now().UnixNano()
		for _, b := range c.ack(lsn) {
			for _, at := range b.dispatched {
				r.m.delivery.Observe(float64(now-at) / 1e9)
			}
			r.ackLogTime.Store(b.logTime)
		}
	}
}

// recover is a recovery fetcher: it reads the target's missed range from the
// LogStore into the catchup queue, then calls FetchingCompleted. It stops
// quietly when its term goes stale.
func (r *runner) recover(ctx context.Context, c *conn, d *dispatcher.Dispatcher, rec dispatcher.Recovery) {
	log := r.p.log.With("target", r.cfg.ID, "term", rec.Term)
	start := time.Now()
	err := r.p.fetch.ReadRange(ctx, rec.From, rec.To, r.cfg.Topics, func(txn *logstorepb.Transaction) error {
		for {
			switch res := d.PushCatchup(r.cfg.ID, rec.Term, txn, r.p.cfg.Now().UnixNano()); res {
			case targetqueue.Pushed:
				signal(r.wake)
				return nil
			case targetqueue.Overflow:
				select {
				case <-r.room:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			default:
				return fmt.Errorf("%w: %s", errRecoveryStale, res)
			}
		}
	})
	switch {
	case err == nil:
		d.FetchingCompleted(r.cfg.ID, rec.Term)
		signal(r.wake)
		r.m.recoveries.Inc()
		log.Info("recovery fetched", "from", rec.From, "to", rec.To, "took", time.Since(start))
	case ctx.Err() != nil, errors.Is(err, errRecoveryStale):
	case errors.Is(err, fetcher.ErrBelowRetention):
		r.m.recoveryErrors.WithLabelValues("below_retention").Inc()
		log.Error("target needs transactions the LogStore no longer holds: it cannot be recovered "+
			"without an operator (restore the target from a newer copy)", "from", rec.From, "to", rec.To, "err", err)
		c.cancel(fmt.Errorf("%w: %w", errBlocked, err))
	default:
		r.m.recoveryErrors.WithLabelValues("other").Inc()
		c.cancel(fmt.Errorf("recovery (%d, %d]: %w", rec.From, rec.To, err))
	}
}

// kickIfSuspended ends c with errSlow if the dispatcher holds its target
// suspended in c's term: nothing would ever be queued for c's sender again,
// so only a new session (Return, new term, recovery) makes progress.
func (r *runner) kickIfSuspended(d *dispatcher.Dispatcher, c *conn) {
	if st, ok := d.Stats(r.cfg.ID); ok && st.State == targetqueue.Suspended && st.Term == c.term {
		c.cancel(errSlow)
	}
}

// kickSlow ends the live stream of a target the dispatcher suspended as
// slow; the runner reconnects at once and the target recovers.
func (r *runner) kickSlow() {
	r.mu.Lock()
	c := r.mu.conn
	r.mu.Unlock()
	if c != nil {
		c.cancel(errSlow)
	}
}

// stop ends the runner and waits for it.
func (r *runner) stop() {
	r.cancel()
	<-r.done
}
