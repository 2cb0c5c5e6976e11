package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/types"
)

// A row's LogPlayers: one, or Config.Group members of one group (a new
// group per row, named after it). The first member registers the row's
// targets in the LogStore's registry; the LogStore assigns them. After the
// measurement the last member is killed (its LogStore connections closed,
// then its Run cancelled: no LeaveGroup reaches the LogStore, as after
// kill -9) under continued load, and the row records how long until the
// survivors (a) hold every target it owned, connected and on the main
// stream (state N), and (b) have delivered every one of them a
// transaction or progress marker beyond the LogStore's head at the kill.
// (b) includes, for a target no transaction touched meanwhile, the wait
// for its first progress marker (up to a quarter ProgressInterval, 250 ms
// by default).

// failoverMax bounds the wait for a failover.
const failoverMax = time.Minute

// leaveTimeout bounds a member's LeaveGroup at the end of a row.
const leaveTimeout = 500 * time.Millisecond

// Failover is the measured takeover of a killed member's targets.
type Failover struct {
	// Targets the killed member owned.
	Targets int
	// Owned: until the survivors held all of them in state N; Delivered:
	// until each had applied beyond the head at the kill.
	Owned, Delivered time.Duration
	// Lease is the group lease the LogStore granted.
	Lease time.Duration
}

// playerRun is one running LogPlayer of a row.
type playerRun struct {
	p      *logplayer.Player
	cancel context.CancelFunc
	done   chan error
}

// stop ends the LogPlayer (idempotent).
func (r *playerRun) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.p.Close()
	r.cancel = nil
}

// kill ends a group member the way a crash does: its LogStore connections
// go first, so no heartbeat or LeaveGroup reaches the LogStore.
func (r *playerRun) kill() {
	r.p.Close()
	r.stop()
}

// startPlayer starts LogPlayer i of the row (a group member when
// Config.Group > 1) with the player label on all its goroutines.
func (e *Env) startPlayer(ctx context.Context, i int, tcs []logplayer.TargetConfig) (*playerRun, error) {
	cfg := logplayer.Config{
		PlayerID: "bench", LogStore: e.addrs, Targets: tcs, Logger: e.cfg.Logger, Registerer: prometheus.NewRegistry(),
		DialOptions: e.cfg.dialOptions(),
	}
	if e.cfg.Group > 1 {
		cfg.PlayerID = fmt.Sprintf("bench-m%d", i)
		cfg.Group = &logplayer.GroupConfig{Name: fmt.Sprintf("bench-r%d", e.rows), LeaveTimeout: leaveTimeout}
		if i > 0 {
			cfg.Targets = nil // the first member registers them
		}
	}
	var run *playerRun
	var err error
	asPlayer(ctx, func(lctx context.Context) {
		var p *logplayer.Player
		p, err = logplayer.New(cfg)
		if err != nil {
			return
		}
		pctx, cancel := context.WithCancel(lctx)
		run = &playerRun{p: p, cancel: cancel, done: make(chan error, 1)}
		go func() { run.done <- p.Run(pctx) }()
	})
	return run, err
}

// waitReady waits until every target is connected and in state N on
// exactly one of ps, and (a group) each member has its share.
func waitReady(ctx context.Context, ps []*playerRun, n int) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		seen := map[string]bool{}
		ready := true
		for _, r := range ps {
			ts := r.p.Targets()
			ready = ready && len(ts) >= n/len(ps)
			for _, s := range ts {
				ready = ready && s.Connected && s.State == "N" && !seen[s.ID]
				seen[s.ID] = true
			}
		}
		if ready && len(seen) == n {
			return nil
		}
		for _, r := range ps {
			select {
			case err := <-r.done:
				r.done <- err // stop() reads it again
				return fmt.Errorf("LogPlayer stopped: %v", err)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("targets not ready in %v (%d of %d placed; %s)", readyTimeout, len(seen), n, describe(ps))
		}
	}
}

// failover kills the last member of ps under load and measures how long
// the others take to deliver its targets (see the top of this file).
func (e *Env) failover(ctx context.Context, row *Row, ps []*playerRun, targets []benchTarget, load *producers) error {
	byID := map[string]benchTarget{}
	for i, t := range targets {
		byID[fmt.Sprintf("r%d-shard-%d", e.rows, i)] = t
	}
	victim, survivors := ps[len(ps)-1], ps[:len(ps)-1]
	var ids []string
	for _, s := range victim.p.Targets() {
		ids = append(ids, s.ID)
	}
	lctx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.run(lctx, e.cfg.Producers, failoverMax, 0, nil) }()
	defer func() {
		stopLoad()
		<-loadDone
	}()
	time.Sleep(100 * time.Millisecond) // the load flows before the kill

	if e.cfg.FailoverProfile != "" {
		f, err := os.Create(e.cfg.FailoverProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("failover CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	killed := time.Now()
	victim.kill()
	head, err := e.head(ctx)
	if err != nil {
		return err
	}
	f := &Failover{Targets: len(ids)}
	if g, ok := survivors[0].p.Group(); ok {
		f.Lease = g.Lease
	}
	n, delivered := 0, 0
	for f.Owned == 0 || f.Delivered == 0 {
		if f.Owned == 0 {
			n = 0
			for _, r := range survivors {
				for _, s := range r.p.Targets() {
					if s.Connected && s.State == "N" {
						n++
					}
				}
			}
			if n == row.Targets {
				f.Owned = time.Since(killed)
			}
		}
		if f.Delivered == 0 {
			delivered = 0
			for _, id := range ids {
				if byID[id].applied() > head {
					delivered++
				}
			}
			if delivered == len(ids) {
				f.Delivered = time.Since(killed)
			}
		}
		if time.Since(killed) > failoverMax {
			return fmt.Errorf("failover of %d targets not done in %v: %d of %d targets in state N on the survivors, %d of the %d beyond LSN %d",
				len(ids), failoverMax, n, row.Targets, delivered, len(ids), head)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	row.Failover = f
	return nil
}

// head is the LogStore's highest head LSN over its nodes.
func (e *Env) head(ctx context.Context) (types.LSN, error) {
	var head types.LSN
	var errs []error
	for _, a := range e.addrs {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := e.cl.Status(sctx, a)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		head = max(head, types.LSN(st.HeadLsn))
	}
	if head == 0 && len(errs) > 0 {
		return 0, fmt.Errorf("LogStore head: %w", errors.Join(errs...))
	}
	return head, nil
}

// unregister removes a group row's targets from the LogStore's registry
// (best effort: a failure leaves a row of a dead address for later rows,
// which then do not get ready and say so).
func (e *Env) unregister(tcs []logplayer.TargetConfig) {
	for _, tc := range tcs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.cl.UnregisterTarget(ctx, tc.ID); err != nil {
			e.cfg.Logger.Warn("bench: unregistering a target failed", "target", tc.ID, "err", err)
		}
		cancel()
	}
}

// describe says, for an error, what each LogPlayer holds: targets, how
// many are ready, and a member's lease lapses.
func describe(ps []*playerRun) string {
	var out []string
	for i, r := range ps {
		ready := 0
		ts := r.p.Targets()
		for _, s := range ts {
			if s.Connected && s.State == "N" {
				ready++
			}
		}
		d := fmt.Sprintf("player %d: %d targets, %d ready", i, len(ts), ready)
		if g, ok := r.p.Group(); ok {
			d += fmt.Sprintf(", %d lease lapses, %d gained, %d lost", g.Lapses, g.Gained, g.Lost)
		}
		out = append(out, d)
	}
	return strings.Join(out, "; ")
}

// waitClusterVersion waits until a LogStore node has applied the cluster
// version its binary supports: a LogStore just started raises it a moment
// after its leader is elected, and the group's commands need it (a
// registration before that fails with FAILED_PRECONDITION).
func (e *Env) waitClusterVersion(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		for _, a := range e.addrs {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := e.cl.Status(sctx, a)
			cancel()
			if err == nil && st.SupportedVersion > 0 && st.ClusterVersion >= st.SupportedVersion {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the LogStore did not reach its supported cluster version in %v", readyTimeout)
		}
	}
}
