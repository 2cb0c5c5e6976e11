package target_test

// The ownership transitions of tla/PlayerGroup.tla against the REAL target
// applier: a seeded random walk over the model's actions (Tick with lease
// expiry, Assign, Move, Heartbeat, Check, Pause/Resume, Open, Send, a send
// racing a takeover, target Crash/Restart) drives two "players" whose
// Deliver streams (targettest senders) carry the store's fencing token as
// their Hello epoch. The store and the players are the model (this file);
// the target is the real target.Server over a MemStore, restarted on the
// same MemStore after a crash. After every step the model's invariants are
// checked against the real target's state: its State (applied LSN, the
// persisted highest epoch) equals the model's, the applied deliveries are
// exactly LSNs 1..applied once each in order (ExactlyOnceInOrder), and no
// delivery of an older assignment than one whose Hello had reached the
// target was applied (NoStaleApply; each delivery carries its stream's
// token and assignment generation). Where the model predicts a Hello's
// outcome (accept, STALE_EPOCH, SUPERSEDED) the real outcome must match.
//
// When the LogPlayer group lands (issue #13), the model's store and players
// here can be replaced by the real PlayerGroup apply and logplayer runner;
// the target half and the invariants stay.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

const (
	gLease    = 3    // lease, log time units
	gMargin   = 1    // the player's local margin
	gMessages = 1000 // LSNs 1..gMessages, all on topic x (more than a walk sends)
	gPlayers  = 2
)

// gTarget is the real target process: a Server on a MemStore that outlives
// it (a crash stops the Server and its gRPC server; Restart starts a new
// one on the same MemStore).
type gTarget struct {
	t     *testing.T
	store *targettest.MemStore
	cc    *grpc.ClientConn
	stop  func()
}

func (g *gTarget) start() {
	g.t.Helper()
	srv, err := target.NewServer(target.Config{TargetID: "t1", Store: g.store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		g.t.Fatalf("NewServer: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		g.t.Fatalf("listen: %v", err)
	}
	gs := grpc.NewServer(target.ServerOptions()...)
	srv.Register(gs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // written once by the serving goroutine
	go func() { done <- target.Serve(ctx, gs, lis, srv) }()
	g.cc = targettest.Dial(g.t, lis.Addr().String())
	stopped := false
	g.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			g.t.Errorf("serve: %v", err)
		}
		_ = g.cc.Close()
	}
	g.t.Cleanup(g.stop)
}

type gStream struct {
	s        *targettest.Sender
	tok, gen uint64
	sess     uint64
	pos      uint64 // next LSN to send
	closed   bool   // the player closed its side (lost the target)
	ended    bool   // the target ended it (takeover, crash)
}

type gPlayer struct {
	paused   bool
	ok       bool  // the last local lease check passed
	dl       int64 // local lease deadline
	held     uint64
	heldGen  uint64
	sessions uint64
	st       *gStream
}

type gActive struct {
	p    int // -1: none
	sess uint64
}

// groupWorld is the model's store and players plus the model's view of the
// target, checked against the real one.
type groupWorld struct {
	t    *testing.T
	rng  *rand.Rand
	bump bool // FALSE: the Broken store that keeps the token on reassignment
	log  []string

	// store
	now     int64
	lease   [gPlayers]int64
	owner   int // -1: none
	tok     uint64
	counter uint64
	gen     uint64
	moves   int

	players [gPlayers]gPlayer

	// target
	tgt     *gTarget
	up      bool
	tokHi   uint64
	sessHi  uint64
	active  gActive
	applied uint64
	gseen   uint64            // ghost: newest assignment whose Hello reached the target
	seenAt  map[uint64]uint64 // ghost: gseen when each LSN was applied
}

func newGroupWorld(t *testing.T, seed int64, bump bool) *groupWorld {
	w := &groupWorld{t: t, rng: rand.New(rand.NewSource(seed)), bump: bump, owner: -1,
		active: gActive{p: -1}, up: true, seenAt: map[uint64]uint64{}}
	w.tgt = &gTarget{t: t, store: &targettest.MemStore{}}
	w.tgt.start()
	return w
}

func (w *groupWorld) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("t=%d ", w.now)+fmt.Sprintf(format, args...))
}

func (w *groupWorld) live(p int) bool { return w.lease[p] > w.now }

func (w *groupWorld) newOwner(p int) {
	w.owner = p
	w.counter++
	if w.bump || w.tok == 0 {
		w.tok = w.counter
	}
	w.gen++
	w.logf("store: owner p%d token %d gen %d", p, w.tok, w.gen)
}

func groupDelivery(lsn, tok, gen uint64) *targetpb.Delivery {
	return &targetpb.Delivery{Lsn: lsn, Slices: []*logstorepb.TxnSlice{{
		Topic: "x", FirstOffset: lsn - 1,
		Messages: []*logstorepb.Message{{Value: []byte(fmt.Sprintf("%d/%d", tok, gen))}},
	}}}
}

// accepts is the target's accept rule, as the model states it.
func (w *groupWorld) accepts(tok, sess uint64) bool {
	return tok > w.tokHi || (tok == w.tokHi && sess >= w.sessHi)
}

// endStream ends p's stream in the model and waits for the real one to end.
func (w *groupWorld) endStream(ctx context.Context, p int) error {
	st := w.players[p].st
	if st == nil || st.ended {
		return nil
	}
	st.ended = true
	if err := st.s.Wait(ctx); err != nil && ctx.Err() != nil {
		return fmt.Errorf("p%d's stream did not end: %v", p, err)
	}
	return nil
}

// gWeights: the actions of step, each as often as it appears: heartbeats
// often enough that leases mostly hold, failures rarer than deliveries.
var gWeights = []int{0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 6, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10, 10, 10, 11}

// step takes one random enabled action. It returns an error when the real
// target disagrees with the model.
func (w *groupWorld) step(ctx context.Context) error {
	for {
		p := w.rng.Intn(gPlayers)
		q := 1 - p
		pl := &w.players[p]
		switch gWeights[w.rng.Intn(len(gWeights))] {
		case 0: // Tick: log time advances; expired leases end, their targets lose the owner
			w.now++
			for i := range w.lease {
				if w.lease[i] != 0 && w.lease[i] <= w.now {
					w.lease[i] = 0
					w.logf("store: p%d's lease expired", i)
					if w.owner == i {
						w.owner = -1
					}
				}
			}
			return nil
		case 1: // Assign
			if w.owner != -1 || !w.live(p) {
				continue
			}
			w.newOwner(p)
			return nil
		case 2: // Move (rebalance), at most 20
			if w.moves >= 20 || w.owner == -1 || w.owner == p || !w.live(p) {
				continue
			}
			w.moves++
			w.newOwner(p)
			return nil
		case 3, 4: // Heartbeat
			if pl.paused {
				continue
			}
			w.lease[p] = w.now + gLease
			pl.dl = w.now + gLease - gMargin
			pl.ok = true
			held, gen := uint64(0), uint64(0)
			if w.owner == p {
				held, gen = w.tok, w.gen
			}
			if held != pl.held && pl.st != nil && !pl.st.closed && !pl.st.ended {
				pl.st.closed = true
				_ = pl.st.s.CloseSend() // the target applies what it got and ends the stream
				if err := w.endStream(ctx, p); err != nil {
					return err
				}
				w.logf("p%d: closed its stream (token %d -> %d)", p, pl.held, held)
			}
			pl.held, pl.heldGen = held, gen
			w.logf("p%d: heartbeat, holds token %d", p, held)
			return nil
		case 5: // Check
			if pl.paused || !pl.ok || w.now < pl.dl {
				continue
			}
			pl.ok = false
			w.logf("p%d: local lease check fails", p)
			return nil
		case 6: // Pause (rarely) / Resume
			if !pl.paused && w.rng.Intn(3) != 0 {
				continue
			}
			pl.paused = !pl.paused
			w.logf("p%d: paused=%v", p, pl.paused)
			return nil
		case 7: // Open
			if pl.paused || !pl.ok || pl.held == 0 || !w.up || (pl.st != nil && !pl.st.closed && !pl.st.ended) {
				continue
			}
			return w.open(ctx, p)
		case 8, 9: // Send
			st := pl.st
			if pl.paused || !pl.ok || st == nil || st.closed || st.pos > gMessages ||
				(st.ended && w.rng.Intn(4) != 0) {
				continue
			}
			return w.send(ctx, p)
		case 10: // a send of p racing q's takeover
			st := pl.st
			qp := &w.players[q]
			if pl.paused || !pl.ok || st == nil || st.closed || st.ended || st.pos > gMessages ||
				w.active != (gActive{p, st.sess}) || qp.paused || !qp.ok || qp.held == 0 ||
				(qp.st != nil && !qp.st.closed && !qp.st.ended) || !w.accepts(qp.held, qp.sessions+1) {
				continue
			}
			return w.race(ctx, p, q)
		case 11: // target Crash (rarely) / Restart
			if w.up && w.rng.Intn(4) != 0 {
				continue
			}
			if w.up {
				w.tgt.stop()
				w.up = false
				w.active = gActive{p: -1}
				w.sessHi = 0
				for i := range w.players {
					if st := w.players[i].st; st != nil {
						st.ended = true
					}
				}
				w.logf("target: crash")
			} else {
				w.tgt.start()
				w.up = true
				w.logf("target: restart")
			}
			return nil
		}
	}
}

func (w *groupWorld) open(ctx context.Context, p int) error {
	pl := &w.players[p]
	pl.sessions++
	tok, gen, sess := pl.held, pl.heldGen, pl.sessions
	want := w.accepts(tok, sess)
	old := w.active
	s, ack, err := targettest.Open(ctx, w.tgt.cc, targettest.Hello("t1", types.Epoch(tok), types.Session(sess)))
	if gen > w.gseen {
		w.gseen = gen
	}
	if err != nil {
		d := target.Detail(err)
		w.logf("p%d: Hello token %d session %d refused: %v", p, tok, sess, err)
		if want {
			return fmt.Errorf("p%d's Hello (token %d, session %d) refused, the model accepts it (highest %d, session %d): %v",
				p, tok, sess, w.tokHi, w.sessHi, err)
		}
		wantCode := logstorepb.ErrorCode_STALE_EPOCH
		if tok == w.tokHi {
			wantCode = logstorepb.ErrorCode_SUPERSEDED
		}
		if status.Code(err) != codes.Aborted && status.Code(err) != codes.FailedPrecondition || d == nil || d.Code != wantCode {
			return fmt.Errorf("p%d's Hello refused with %v (detail %v), want %v", p, err, d, wantCode)
		}
		pl.held, pl.heldGen = 0, 0 // failFenced: until a heartbeat gives it the target again
		pl.st = nil
		return nil
	}
	w.t.Cleanup(s.Close)
	w.logf("p%d: Hello token %d session %d accepted, applied %d", p, tok, sess, ack.AppliedLsn)
	if !want {
		s.Close()
		return fmt.Errorf("p%d's Hello (token %d, session %d) accepted, the model refuses it (highest %d, session %d)",
			p, tok, sess, w.tokHi, w.sessHi)
	}
	if ack.AppliedLsn != w.applied {
		return fmt.Errorf("HelloAck applied %d, model %d", ack.AppliedLsn, w.applied)
	}
	if tok > w.tokHi {
		w.tokHi = tok
	}
	w.sessHi = sess
	w.active = gActive{p, sess}
	if old.p >= 0 && old.p != p {
		if err := w.endStream(ctx, old.p); err != nil {
			return err
		}
	}
	pl.st = &gStream{s: s, tok: tok, gen: gen, sess: sess, pos: w.applied + 1}
	return nil
}

func (w *groupWorld) send(ctx context.Context, p int) error {
	st := w.players[p].st
	lsn := st.pos
	st.pos++
	if w.active != (gActive{p, st.sess}) || st.ended {
		// An ended (superseded, fenced or crashed) stream: the batch is
		// lost or dropped, nothing may be applied.
		_ = st.s.Send(groupDelivery(lsn, st.tok, st.gen))
		w.logf("p%d: sent %d on an ended stream", p, lsn)
		return nil
	}
	if err := st.s.Send(groupDelivery(lsn, st.tok, st.gen)); err != nil {
		return fmt.Errorf("p%d: send %d on the active stream: %v", p, lsn, err)
	}
	if err := st.s.WaitAck(ctx, types.LSN(lsn)); err != nil {
		return fmt.Errorf("p%d: ack of %d on the active stream: %v", p, lsn, err)
	}
	w.applied = lsn
	w.seenAt[lsn] = w.gseen
	w.logf("p%d: %d applied (token %d)", p, lsn, st.tok)
	return nil
}

// race: p sends its next LSN and q opens a stream that takes over at once,
// without waiting for p's ack; either may reach the applier first. The
// HelloAck tells which: the batch was applied before the takeover, or it
// was dropped with the overtaken stream.
func (w *groupWorld) race(ctx context.Context, p, q int) error {
	st := w.players[p].st
	lsn := st.pos
	st.pos++
	if err := st.s.Send(groupDelivery(lsn, st.tok, st.gen)); err != nil {
		return fmt.Errorf("p%d: send %d: %v", p, lsn, err)
	}
	qp := &w.players[q]
	qp.sessions++
	tok, gen, sess := qp.held, qp.heldGen, qp.sessions
	s, ack, err := targettest.Open(ctx, w.tgt.cc, targettest.Hello("t1", types.Epoch(tok), types.Session(sess)))
	if err != nil {
		return fmt.Errorf("p%d's Hello (token %d, session %d) racing p%d's send refused: %v", q, tok, sess, p, err)
	}
	w.t.Cleanup(s.Close)
	switch ack.AppliedLsn {
	case lsn: // p's batch came first
		w.applied = lsn
		w.seenAt[lsn] = w.gseen
	case lsn - 1:
	default:
		return fmt.Errorf("HelloAck applied %d racing the send of %d (applied %d)", ack.AppliedLsn, lsn, w.applied)
	}
	if gen > w.gseen {
		w.gseen = gen
	}
	w.logf("p%d sent %d, p%d's Hello token %d session %d took over at applied %d", p, lsn, q, tok, sess, ack.AppliedLsn)
	if tok > w.tokHi {
		w.tokHi = tok
	}
	w.sessHi = sess
	w.active = gActive{q, sess}
	if err := w.endStream(ctx, p); err != nil {
		return err
	}
	qp.st = &gStream{s: s, tok: tok, gen: gen, sess: sess, pos: w.applied + 1}
	return nil
}

// check compares the real target with the model and checks the invariants.
func (w *groupWorld) check() error {
	// The model's own invariants (StoreAssignment, LocalLeaseExclusive).
	if w.owner >= 0 && !w.live(w.owner) {
		return fmt.Errorf("model: owner p%d is not live", w.owner)
	}
	if w.tokHi > w.tok {
		return fmt.Errorf("model: target's token %d above the store's %d", w.tokHi, w.tok)
	}
	a, b := &w.players[0], &w.players[1]
	if w.tok != 0 && a.held == w.tok && b.held == w.tok && w.now < a.dl && w.now < b.dl && a.heldGen == b.heldGen {
		return fmt.Errorf("model: both players' local leases hold token %d", w.tok)
	}
	if !w.up {
		return nil // the store keeps its state; checked again after the restart
	}
	st, err := w.tgt.store.State()
	if err != nil {
		return err
	}
	if uint64(st.AppliedLSN) != w.applied || uint64(st.Epoch) != w.tokHi {
		return fmt.Errorf("target State applied %d epoch %d, model applied %d highest token %d",
			st.AppliedLSN, st.Epoch, w.applied, w.tokHi)
	}
	lastTok := uint64(0)
	for i, d := range w.tgt.store.Applied() {
		if d.Lsn != uint64(i+1) {
			return fmt.Errorf("ExactlyOnceInOrder: applied LSNs %v", appliedLSNs(w.tgt.store))
		}
		var tok, gen uint64
		if _, err := fmt.Sscanf(string(d.Slices[0].Messages[0].Value), "%d/%d", &tok, &gen); err != nil {
			return err
		}
		if gen < w.seenAt[d.Lsn] {
			return fmt.Errorf("NoStaleApply: LSN %d applied from assignment %d (token %d) after a Hello of assignment %d reached the target",
				d.Lsn, gen, tok, w.seenAt[d.Lsn])
		}
		if tok < lastTok || tok > uint64(st.Epoch) {
			return fmt.Errorf("NoStaleApply: LSN %d applied with token %d after token %d (highest %d)", d.Lsn, tok, lastTok, st.Epoch)
		}
		lastTok = tok
	}
	return nil
}

func runGroupWalk(t *testing.T, seed int64, steps int, bump bool) (*groupWorld, error) {
	w := newGroupWorld(t, seed, bump)
	ctx := targettest.Context(t)
	for i := 0; i < steps; i++ {
		if err := w.step(ctx); err != nil {
			return w, fmt.Errorf("step %d: %w", i, err)
		}
		if err := w.check(); err != nil {
			return w, fmt.Errorf("step %d: %w", i, err)
		}
	}
	return w, nil
}

func (w *groupWorld) trace() string {
	log := w.log
	if len(log) > 40 {
		log = log[len(log)-40:]
	}
	return strings.Join(log, "\n")
}

// TestGroupConformance: the seeded walks of the PlayerGroup.tla ownership
// model on the real target hold every invariant.
func TestGroupConformance(t *testing.T) {
	applied, stale, refused, races, crashes := 0, 0, 0, 0, 0
	for seed := int64(1); seed <= 8; seed++ {
		w, err := runGroupWalk(t, seed, 1500, true)
		if err != nil {
			t.Fatalf("seed %d: %v\nlast steps:\n%s", seed, err, w.trace())
		}
		applied += int(w.applied)
		for _, l := range w.log {
			if strings.Contains(l, "refused") {
				refused++
			}
			if strings.Contains(l, "ended stream") {
				stale++
			}
			if strings.Contains(l, "took over") {
				races++
			}
			if strings.Contains(l, "crash") {
				crashes++
			}
		}
	}
	// The walks must reach the transitions the model is about.
	if applied == 0 || refused == 0 || stale == 0 || races == 0 || crashes == 0 {
		t.Fatalf("walks too weak: %d LSNs applied, %d Hellos refused, %d sends on ended streams, %d races, %d crashes",
			applied, refused, stale, races, crashes)
	}
	t.Logf("8 walks of 1500 steps: %d LSNs applied, %d Hellos refused, %d sends on ended streams, %d sends racing a takeover, %d target crashes",
		applied, refused, stale, races, crashes)
}

// TestGroupConformanceNoBump: the Broken store of
// PlayerGroupBrokenNoBump.cfg (a new owner keeps the old token) against the
// real target: the old owner's later session passes the target's
// same-epoch session check and applies after the new owner's Hello, and
// the checker reports NoStaleApply. The checker catches what TLC does.
func TestGroupConformanceNoBump(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		w, err := runGroupWalk(t, seed, 400, false)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "NoStaleApply") {
			t.Fatalf("seed %d: %v\nlast steps:\n%s", seed, err, w.trace())
		}
		t.Logf("seed %d: %v", seed, err)
		return
	}
	t.Fatal("no walk found the stale apply of a store that does not bump tokens")
}
