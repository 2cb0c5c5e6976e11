package logplayer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/metric"
	"github.com/logplayer/logplayer/internal/storeconn"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// The group member runtime (issue 13). A Player with Config.Group is a
// member of a named LogPlayer group: it renews a lease through the
// LogStore (PlayerGroup.Heartbeat, a Raft command measured in log time) and
// delivers to the targets the LogStore assigns it, each with its fencing
// token as the Hello epoch.
//
// The lease rule. Before each heartbeat the member reads its monotonic
// clock (sent). The LogStore renews the lease at the log time t of the
// heartbeat's entry, which is later than sent, to t + lease. The member's
// local deadline is sent + lease × (1 − LeaseMargin) of the last renewal it
// received: earlier than the LogStore's end of the lease by at least the
// margin, which absorbs drift between the two clocks' rates. Past the
// deadline the member delivers nothing: every Hello and Send checks it
// (Player.leaseHeld), and a timer stops every runner (the first line of
// defense); the targets' token fencing is the backstop. It keeps
// heartbeating; a renewal after a lapse takes the response's assignments
// afresh.
//
// Goroutines: the heartbeat loop (member.run, one, under Run's WaitGroup:
// heartbeat, apply the assignments, wait for the next period; at the end
// stop every target and LeaveGroup) and the lapse timer's callback
// (time.AfterFunc, re-armed by every renewal: stops every target when the
// deadline passed without a renewal). Both apply changes under applyMu.

// groupPolicy: heartbeats and leaves go to the leader and are retried on
// another node after anything but an answer about the request (a renewal
// twice is harmless), like the fetcher's unary calls.
var groupPolicy = storeconn.Policy{Retry: apierr.NodeFault, Leader: true}

// groupAttemptTimeout bounds one attempt of a group call.
const groupAttemptTimeout = time.Second

// registerTimeout bounds registering the configured targets at start.
const registerTimeout = 30 * time.Second

// member is the group membership of one Player.
type member struct {
	p      *Player
	cfg    GroupConfig
	log    *slog.Logger
	sc     *storeconn.Conn
	groups []logstorepb.PlayerGroupClient // by storeconn node index
	m      *groupMetrics
	lapse  *time.Timer // armed at the local deadline by each renewal

	applyMu sync.Mutex // serializes applying assignments and lapses
	owned   map[string]TargetConfig

	st struct { // what status shows
		sync.Mutex
		leaseNanos int64
		generation uint64
		renewals   uint64
		lapses     uint64
		lastLapse  time.Time
		gained     uint64
		lost       uint64
		lastErr    string
	}
}

// groupMetrics are the logplayer_group_… series.
type groupMetrics struct {
	reassignments *prometheus.CounterVec
	renewal       prometheus.Histogram
	lapses        prometheus.Counter
	errors        prometheus.Counter
}

func newMember(p *Player, cfg GroupConfig, conns []grpc.ClientConnInterface) (*member, error) {
	if len(conns) == 0 {
		return nil, fmt.Errorf("%w: no LogStore connections for the group", ErrInvalidConfig)
	}
	g := &member{p: p, cfg: cfg, owned: map[string]TargetConfig{},
		log: p.log.With("group", cfg.Name, "member", cfg.MemberID)}
	var ls []logstorepb.LogStoreClient
	for _, cc := range conns {
		ls = append(ls, logstorepb.NewLogStoreClient(cc))
		g.groups = append(g.groups, logstorepb.NewPlayerGroupClient(cc))
	}
	var err error
	g.sc, err = storeconn.New(storeconn.Config{
		Nodes:          len(conns),
		Node:           func(_ context.Context, i int) (logstorepb.LogStoreClient, error) { return ls[i], nil },
		InitialBackoff: p.cfg.RetryInitial, MaxBackoff: p.cfg.RetryMax,
		AttemptTimeout: groupAttemptTimeout,
		Logger:         g.log,
	})
	if err != nil {
		return nil, fmt.Errorf("logplayer: group: %w", err)
	}
	f := metric.With(p.cfg.Registerer, nil)
	g.m = &groupMetrics{
		reassignments: f.NewCounterVec(prometheus.CounterOpts{Name: "logplayer_group_reassignments_total", Help: "Targets this group member gained or lost (change: gained, lost, token: a new token for a target it kept)."}, []string{"change"}),
		renewal:       f.NewHistogram(prometheus.HistogramOpts{Name: "logplayer_group_lease_renewal_seconds", Help: "From sending a group heartbeat to its answer (successful renewals).", Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16)}),
		lapses:        f.NewCounter(prometheus.CounterOpts{Name: "logplayer_group_lease_lapses_total", Help: "Times the local lease deadline passed without a renewal (the member stopped delivering to every target)."}),
		errors:        f.NewCounter(prometheus.CounterOpts{Name: "logplayer_group_heartbeat_errors_total", Help: "Group heartbeats that failed (after the LogStore access layer's retries)."}),
	}
	if err := f.Err(); err != nil {
		return nil, fmt.Errorf("logplayer: metrics: %w", err)
	}
	for _, l := range []string{"gained", "lost", "token"} {
		g.m.reassignments.WithLabelValues(l)
	}
	return g, nil
}

// since is the member's monotonic clock: time since the Player's base.
func (g *member) since() time.Duration { return time.Since(g.p.base) }

// call runs one group call with the group policy.
func (g *member) call(ctx context.Context, name string, fn func(ctx context.Context, c logstorepb.PlayerGroupClient) error) error {
	p := groupPolicy
	p.Name = name
	return g.sc.Call(ctx, p, func(ctx context.Context, node int, _ logstorepb.LogStoreClient) error {
		return fn(ctx, g.groups[node])
	})
}

// register adds (or replaces) targets in the LogStore's registry. Needs
// an identity with the admin role when the LogStore checks roles.
//
// While the LogStore runs below the cluster version the registry needs
// (FEATURE_NOT_ENABLED: a voter not yet upgraded, or a new cluster before
// the leader's first version poll) it waits, with backoff and a warning
// every versionWarnEvery, until ctx ends: a player upgraded before the
// LogStore starts once the LogStore catches up.
func (g *member) register(ctx context.Context, tcs []TargetConfig) error {
	for _, tc := range tcs {
		var warned time.Time
		for backoff := versionBackoffMin; ; backoff = min(2*backoff, versionBackoffMax) {
			err := g.registerOne(ctx, tc)
			if err == nil {
				break
			}
			if apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED || ctx.Err() != nil {
				return fmt.Errorf("logplayer: registering target %s: %w", tc.ID, err)
			}
			if time.Since(warned) >= versionWarnEvery {
				g.log.Warn("waiting for the LogStore's cluster version to register targets", "target", tc.ID, "err", err)
				warned = time.Now()
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("logplayer: registering target %s: %w", tc.ID, err)
			case <-t.C:
			}
		}
		g.log.Info("target registered", "target", tc.ID, "address", tc.Address, "topics", tc.Topics)
	}
	return nil
}

// The wait of register while the cluster version is too low.
const (
	versionBackoffMin = 50 * time.Millisecond
	versionBackoffMax = time.Second
	versionWarnEvery  = 10 * time.Second
)

// registerOne is one RegisterTarget call (with the group policy's
// retries), bounded by registerTimeout.
func (g *member) registerOne(ctx context.Context, tc TargetConfig) error {
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	return g.call(ctx, "RegisterTarget", func(ctx context.Context, c logstorepb.PlayerGroupClient) error {
		_, err := c.RegisterTarget(ctx, &logstorepb.RegisterTargetRequest{Target: &logstorepb.RegisteredTarget{
			Id: tc.ID, Address: tc.Address, Topics: tc.Topics,
		}})
		return err
	})
}

// run is the heartbeat loop, until ctx ends; then it stops every target
// and leaves the group.
func (g *member) run(ctx context.Context) {
	g.lapse = time.AfterFunc(time.Hour, g.checkLapse)
	g.lapse.Stop()
	defer g.lapse.Stop()
	interval := g.cfg.HeartbeatInterval
	if interval == 0 {
		interval = DefaultHeartbeatInterval
	}
	failures := 0
	for ctx.Err() == nil {
		sent := g.since()
		hctx, cancel := context.WithTimeout(ctx, interval)
		var resp *logstorepb.GroupHeartbeatResponse
		err := g.call(hctx, "Heartbeat", func(ctx context.Context, c logstorepb.PlayerGroupClient) error {
			r, err := c.Heartbeat(ctx, &logstorepb.GroupHeartbeatRequest{
				Group: g.cfg.Name, MemberId: g.cfg.MemberID, AdminAddress: g.cfg.AdminAddress, Incarnation: g.cfg.Incarnation,
			})
			resp = r
			return err
		})
		cancel()
		if ctx.Err() != nil {
			break
		}
		if err == nil && resp.LeaseNanos <= 0 {
			err = fmt.Errorf("heartbeat answer without a lease (lease_nanos %d)", resp.LeaseNanos)
		}
		if err != nil {
			failures++
			g.m.errors.Inc()
			g.st.Lock()
			g.st.lastErr = err.Error()
			g.st.Unlock()
			level := slog.LevelDebug
			if failures == 1 || failures%quietFailures == 0 {
				level = slog.LevelWarn
			}
			g.log.Log(ctx, level, "group heartbeat failed", "failures", failures, "err", err)
		} else {
			failures = 0
			g.m.renewal.Observe((g.since() - sent).Seconds())
			g.renewed(ctx, sent, resp)
			if g.cfg.HeartbeatInterval == 0 {
				interval = time.Duration(resp.LeaseNanos) / 3
			}
		}
		t := time.NewTimer(max(0, sent+interval-g.since()))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	g.applyMu.Lock()
	g.p.leaseUntil.Store(0)
	g.stopAllLocked("shutting down")
	g.applyMu.Unlock()
	lctx, cancel := context.WithTimeout(context.Background(), g.cfg.LeaveTimeout)
	defer cancel()
	err := g.call(lctx, "LeaveGroup", func(ctx context.Context, c logstorepb.PlayerGroupClient) error {
		_, err := c.LeaveGroup(ctx, &logstorepb.LeaveGroupRequest{Group: g.cfg.Name, MemberId: g.cfg.MemberID, Incarnation: g.cfg.Incarnation})
		return err
	})
	if err != nil {
		g.log.Warn("leaving the group failed: its targets move when the lease ends", "err", err)
		return
	}
	g.log.Info("left the group")
}

// deadline is the local lease deadline of a renewal sent at sent.
func (g *member) deadline(sent time.Duration, leaseNanos int64) time.Duration {
	return sent + time.Duration(float64(leaseNanos)*(1-g.cfg.LeaseMargin))
}

// renewed applies a successful heartbeat sent at sent: the new local
// deadline, then the assignments.
func (g *member) renewed(ctx context.Context, sent time.Duration, resp *logstorepb.GroupHeartbeatResponse) {
	g.applyMu.Lock()
	defer g.applyMu.Unlock()
	deadline := g.deadline(sent, resp.LeaseNanos)
	g.st.Lock()
	g.st.leaseNanos, g.st.generation, g.st.lastErr = resp.LeaseNanos, resp.Generation, ""
	g.st.Unlock()
	now := g.since()
	if now >= deadline {
		g.log.Warn("group heartbeat answered after its local lease deadline: not delivering", "took", now-sent)
		return // the lapse timer (armed by the last renewal) has stopped everything, or will
	}
	g.p.leaseUntil.Store(int64(deadline))
	g.lapse.Reset(deadline - now)
	g.st.Lock()
	g.st.renewals++
	g.st.Unlock()
	g.applyLocked(ctx, resp.Assignments)
}

// checkLapse is the lapse timer's callback: when the local deadline passed
// without a renewal, stop delivering to every target.
func (g *member) checkLapse() {
	g.applyMu.Lock()
	defer g.applyMu.Unlock()
	if g.cfg.noLeaseCheck {
		return
	}
	if until := g.p.leaseUntil.Load(); until == 0 || int64(g.since()) < until {
		return // renewed meanwhile, or shutting down
	}
	g.p.leaseUntil.Store(0)
	g.m.lapses.Inc()
	g.st.Lock()
	g.st.lapses++
	g.st.lastLapse = time.Now()
	g.st.Unlock()
	g.log.Warn("group lease lapsed: stopped delivering to every target until renewed", "targets", len(g.owned))
	g.stopAllLocked("lease lapsed")
}

// stopAllLocked stops delivering to every owned target. Caller holds
// applyMu.
func (g *member) stopAllLocked(why string) {
	for _, id := range slices.Sorted(maps.Keys(g.owned)) {
		g.dropLocked(id, why)
	}
}

func (g *member) dropLocked(id, why string) {
	delete(g.owned, id)
	if err := g.p.removeTarget(context.Background(), id, false); err != nil && !errors.Is(err, ErrNotRunning) {
		g.log.Warn("stopping a target failed", "target", id, "why", why, "err", err)
	}
}

// applyLocked makes the owned targets the assignments: removes lost ones
// at once, restarts those whose token or config changed, adds new ones
// (each resumes from its durable applied LSN through its handshake).
// Caller holds applyMu.
func (g *member) applyLocked(ctx context.Context, as []*logstorepb.Assignment) {
	want := map[string]TargetConfig{}
	for _, a := range as {
		t := a.GetTarget()
		if t == nil || a.Token == 0 || (a.MemberId != "" && a.MemberId != g.cfg.MemberID) {
			g.log.Error("ignoring a malformed assignment", "assignment", a.String())
			continue
		}
		want[t.Id] = TargetConfig{ID: t.Id, Address: t.Address, Topics: slices.Clone(t.Topics), Epoch: types.Epoch(a.Token)}
	}
	var gained, lost, token uint64
	restarted := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(g.owned)) {
		have := g.owned[id]
		w, ok := want[id]
		switch {
		case !ok:
			g.dropLocked(id, "assigned to another member")
			lost++
			g.log.Info("target lost to another member", "target", id, "token", have.Epoch)
		case !sameTarget(have, w):
			g.dropLocked(id, "new token or config")
			restarted[id] = true
			if have.Epoch != w.Epoch {
				token++
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if _, ok := g.owned[id]; ok {
			continue
		}
		tc := want[id]
		if err := g.p.addTarget(ctx, tc); err != nil {
			if !errors.Is(err, ErrNotRunning) && ctx.Err() == nil {
				g.log.Error("taking an assigned target failed (retried at the next heartbeat)", "target", id, "err", err)
			}
			continue
		}
		g.owned[id] = tc
		if !restarted[id] {
			gained++
		}
		g.log.Info("target assigned", "target", id, "token", tc.Epoch)
	}
	g.m.reassignments.WithLabelValues("gained").Add(float64(gained))
	g.m.reassignments.WithLabelValues("lost").Add(float64(lost))
	g.m.reassignments.WithLabelValues("token").Add(float64(token))
	g.st.Lock()
	g.st.gained += gained
	g.st.lost += lost
	g.st.Unlock()
}

func sameTarget(a, b TargetConfig) bool {
	return a.ID == b.ID && a.Address == b.Address && a.Epoch == b.Epoch && slices.Equal(a.Topics, b.Topics)
}
