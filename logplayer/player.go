package logplayer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/dispatcher"
	"github.com/logplayer/logplayer/fetcher"
	"github.com/logplayer/logplayer/internal/grpcwindow"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// Errors of the Player.
var (
	// ErrFenced: a target refused this LogPlayer's epoch: a newer LogPlayer
	// owns it. Run returns it (wrapped); this instance must not deliver.
	ErrFenced = errors.New("logplayer: fenced by a newer epoch")
	// ErrNotRunning: the Player is not between the end of its start
	// handshake and the end of Run.
	ErrNotRunning = errors.New("logplayer: not running")
	// ErrAlreadyRunning: Run was called twice.
	ErrAlreadyRunning = errors.New("logplayer: Run called twice")
	// ErrUnknownTarget: no target has this id.
	ErrUnknownTarget = errors.New("logplayer: unknown target")
	// ErrDuplicateTarget: a target with this id exists.
	ErrDuplicateTarget = errors.New("logplayer: duplicate target")
	// ErrGroupManaged: a group member's targets are its assignments in the
	// LogStore; add or remove them in the registry (RegisterTarget).
	ErrGroupManaged = errors.New("logplayer: targets of a group member are managed by the LogStore's target registry")
)

// reportTimeout bounds one ReportConsumer call.
const reportTimeout = 5 * time.Second

// Player is one LogPlayer instance. See the package doc.
type Player struct {
	cfg   Config
	log   *slog.Logger
	fetch *fetcher.Fetcher
	conns []*grpc.ClientConn // LogStore connections dialled by New
	m     *metrics

	epoch atomic.Uint64
	d     atomic.Pointer[dispatcher.Dispatcher] // set once, before ready closes
	ready chan struct{}                         // closed when d is set

	// runners is copy-on-write: readers load it without a lock; writers
	// hold admin.
	runners atomic.Pointer[map[string]*runner]

	admin struct {
		sync.Mutex
		started bool
		ctx     context.Context // Run's context; nil before Run
		stopped bool            // Run returned
	}
	fail func(error) // ends Run with an error (set by Run)

	// session is the last Hello session of this Player (nextSession): one
	// counter for every target, so a target's sessions increase within the
	// epoch whatever was added and removed, and nothing is kept per id.
	session atomic.Uint64

	// The log as the LogStore's Status reports it (logidentity.go): its
	// identity (nil: none yet) and the highest head LSN seen.
	logID   atomic.Pointer[logIdentity]
	logHead atomic.Uint64

	mainLogTime atomic.Int64 // log time of the last transaction dispatched
	busyNanos   atomic.Int64 // time spent in Dispatch (saturation)

	// grp is the group member runtime (nil: single-player mode).
	grp *member
	// base is the origin of leaseUntil on the monotonic clock.
	base time.Time
	// leaseUntil is the local lease deadline of a group member, in
	// nanoseconds since base (0: no lease). Every Hello and Send checks it
	// (leaseHeld), so a member whose lease lapsed sends nothing even before
	// the member runtime has stopped its runners.
	leaseUntil atomic.Int64

	floors struct { // last acked LSN reported per target id (floors.go)
		sync.Mutex
		last       map[string]types.LSN    // targets with a runner
		removed    map[string]removedFloor // the latest removedMax removed ones
		seq        uint64                  // removals so far (removedFloor.seq)
		removedMax int                     // removedFloorsMax (tests lower it)
	}
}

// New validates cfg and dials the LogStore. It does not contact anything
// yet: Run does.
func New(cfg Config) (*Player, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Player{cfg: cfg, log: cfg.Logger.With("player", cfg.PlayerID), ready: make(chan struct{}), base: time.Now()}
	p.floors.last = map[string]types.LSN{}
	p.floors.removed = map[string]removedFloor{}
	p.floors.removedMax = removedFloorsMax
	empty := map[string]*runner{}
	p.runners.Store(&empty)
	p.fail = func(error) {}
	m, err := newMetrics(cfg.Registerer, p)
	if err != nil {
		return nil, fmt.Errorf("logplayer: metrics: %w", err)
	}
	p.m = m
	p.fetch = cfg.Fetcher
	if p.fetch == nil {
		var clients []logstorepb.LogStoreClient
		for _, addr := range cfg.LogStore {
			cc, err := grpc.NewClient(addr, append(p.dialOptions(),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgBytes)))...)
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("logplayer: dial LogStore %s: %w", addr, err)
			}
			p.conns = append(p.conns, cc)
			clients = append(clients, logstorepb.NewLogStoreClient(cc))
		}
		p.fetch, err = fetcher.New(fetcher.Config{
			Nodes: clients, RetryInitial: cfg.RetryInitial, RetryMax: cfg.RetryMax,
			Logger: p.log, Registerer: cfg.Registerer,
		})
		if err != nil {
			p.Close()
			return nil, err
		}
	}
	if cfg.Group != nil {
		conns := cfg.Group.Conns
		if len(conns) == 0 {
			for _, cc := range p.conns {
				conns = append(conns, cc)
			}
		}
		if p.grp, err = newMember(p, *cfg.Group, conns); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// dialOptions are the options of every connection the Player dials:
// plaintext, keepalive, and a reconnect backoff bounded like ours (gRPC's
// default waits up to two minutes).
func (p *Player) dialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay: p.cfg.RetryInitial, Multiplier: 1.6, Jitter: 0.2, MaxDelay: p.cfg.RetryMax,
			},
			MinConnectTimeout: p.cfg.HelloTimeout,
		}),
	}
	if p.cfg.Keepalive.Time > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(p.cfg.Keepalive))
	}
	// Fixed windows (internal/grpcwindow) as the target server's
	// (target.ServerOptions): no bandwidth-estimator PING per Ack.
	opts = append(opts, grpcwindow.DialOptions()...)
	return append(opts, p.cfg.DialOptions...)
}

// Close releases the LogStore connections New dialled. Call it after Run
// returned.
func (p *Player) Close() {
	for _, cc := range p.conns {
		_ = cc.Close()
	}
	p.conns = nil
}

// Epoch returns this instance's epoch (0 before Run obtained it).
func (p *Player) Epoch() types.Epoch { return types.Epoch(p.epoch.Load()) }

func (p *Player) dispatcher() *dispatcher.Dispatcher { return p.d.Load() }

// nextSession returns the session number of the next Hello to a target:
// above every session this Player used, never reset in this epoch
// (types.Session). One counter serves all targets: each target's sessions
// still increase, and a target removed and added again cannot reuse one.
func (p *Player) nextSession() types.Session {
	return types.Session(p.session.Add(1))
}

// Run takes a new epoch from the LogStore, handshakes with every configured
// target (waiting at most HandshakeTimeout), starts the main stream from the
// lowest applied LSN of the targets that answered (the LogStore head if none
// did) and delivers until ctx ends (then it returns nil) or a fatal error:
// ErrFenced (a newer LogPlayer took over), or the main stream's LSN fell
// below the LogStore's retention. Run may be called once.
func (p *Player) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p.admin.Lock()
	if p.admin.started {
		p.admin.Unlock()
		return ErrAlreadyRunning
	}
	p.admin.started = true
	p.admin.ctx = ctx
	p.fail = func(err error) { cancel(err) }
	p.admin.Unlock()

	var bg sync.WaitGroup
	defer func() {
		p.admin.Lock()
		p.admin.stopped = true
		rs := *p.runners.Load()
		p.admin.Unlock()
		cancel(nil)
		for _, r := range rs {
			r.stop()
		}
		bg.Wait()
	}()

	initial := p.cfg.Targets
	if p.grp != nil {
		// A member's targets carry their own tokens: no epoch of its own.
		if err := p.grp.register(ctx, p.cfg.Targets); err != nil {
			return p.ended(ctx, err)
		}
		initial = nil
		p.log.Info("LogPlayer starting as a group member", "group", p.grp.cfg.Name, "member", p.grp.cfg.MemberID,
			"incarnation", p.grp.cfg.Incarnation)
	} else {
		epoch, err := p.fetch.NextEpoch(ctx)
		if err != nil {
			return p.ended(ctx, fmt.Errorf("logplayer: new epoch: %w", err))
		}
		p.epoch.Store(uint64(epoch))
		p.m.epoch.Set(float64(epoch))
		p.log.Info("LogPlayer starting", "epoch", epoch, "targets", len(initial))
	}

	if err := p.loadLog(ctx); err != nil {
		return p.ended(ctx, err)
	}
	start, err := p.startHandshakes(ctx, initial)
	if err != nil {
		return p.ended(ctx, err)
	}
	p.log.Info("main stream starting", "epoch", p.Epoch(), "lsn", start+1)

	if p.grp != nil {
		bg.Add(1)
		go func() {
			defer bg.Done()
			p.grp.run(ctx)
		}()
	}
	bg.Add(2)
	go func() {
		defer bg.Done()
		p.ticker(ctx)
	}()
	go func() {
		defer bg.Done()
		p.reporter(ctx)
	}()
	err = p.fetch.Follow(ctx, start+1, p.dispatch)
	return p.ended(ctx, err)
}

// ended turns Run's last error into its result: nil when ctx was cancelled
// from outside, the fatal cause when a goroutine failed the run.
func (p *Player) ended(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// startHandshakes starts a runner per initial target, waits for their
// handshakes (at most HandshakeTimeout), creates the dispatcher at the
// start LSN and releases the runners. It returns the start LSN.
func (p *Player) startHandshakes(ctx context.Context, initial []TargetConfig) (types.LSN, error) {
	hs := make(chan handshake, len(initial)) // each runner sends at most one
	p.admin.Lock()
	for _, tc := range initial {
		if err := p.startRunnerLocked(ctx, tc, hs); err != nil {
			p.admin.Unlock()
			return 0, err
		}
	}
	p.admin.Unlock()

	applied := map[string]types.LSN{}
	timer := time.NewTimer(p.cfg.HandshakeTimeout)
	defer timer.Stop()
wait:
	for len(applied) < len(initial) {
		select {
		case h := <-hs:
			applied[h.id] = h.applied
		case <-timer.C:
			break wait
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	st, err := p.fetch.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("logplayer: LogStore status: %w", err)
	}
	if err := p.observeStatus(st); err != nil {
		return 0, err
	}
	start := types.LSN(st.HeadLsn)
	if len(applied) > 0 {
		start = slices.Min(slices.Collect(maps.Values(applied)))
	}
	if oldest := types.LSN(st.FirstLsn); oldest > 0 && start+1 < oldest {
		// The main stream cannot start below retention; the targets that
		// need older LSNs fail their recovery loudly instead.
		p.log.Error("targets are behind the LogStore's retention: starting the main stream at the oldest retained LSN",
			"lsn", start+1, "oldest", oldest)
		start = oldest - 1
	}
	silent := []string{}
	for _, tc := range initial {
		if _, ok := applied[tc.ID]; !ok {
			silent = append(silent, tc.ID)
		}
	}
	if len(silent) > 0 {
		p.log.Warn("targets did not answer the start handshake: they recover when they answer", "targets", silent)
	}

	d := dispatcher.New(dispatcher.Config{Queue: p.cfg.Queue, Logger: p.log, ProgressIdle: max(0, p.cfg.ProgressInterval)}, start)
	p.admin.Lock()
	for _, r := range *p.runners.Load() {
		if err := d.AddTarget(r.cfg.ID, r.cfg.Topics); err != nil {
			p.admin.Unlock()
			return 0, err
		}
	}
	p.d.Store(d)
	close(p.ready)
	p.admin.Unlock()
	return start, nil
}

// startRunnerLocked dials a target and starts its runner. Caller holds admin.
func (p *Player) startRunnerLocked(ctx context.Context, tc TargetConfig, hs chan<- handshake) error {
	cc, err := grpc.NewClient(tc.Address, p.dialOptions()...)
	if err != nil {
		return fmt.Errorf("logplayer: dial target %s at %s: %w", tc.ID, tc.Address, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &runner{
		p: p, cfg: tc, cc: cc, client: targetpb.NewTargetClient(cc),
		m:    p.m.forTarget(tc.ID),
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{}), startedAt: p.cfg.Now(),
	}
	rs := maps.Clone(*p.runners.Load())
	rs[tc.ID] = r
	p.runners.Store(&rs)
	go r.run(rctx, hs)
	return nil
}

// dispatch is the main stream's handler (the dispatch loop): one
// transaction to every subscribed target's queue, wake their senders, and
// end the streams of targets found too slow.
func (p *Player) dispatch(txn *logstorepb.Transaction) error {
	start := p.cfg.Now()
	wake, slow := p.d.Load().Dispatch(txn, start.UnixNano())
	if len(wake)+len(slow) > 0 {
		rs := *p.runners.Load()
		for _, id := range wake {
			if r := rs[id]; r != nil {
				signal(r.wake)
			}
		}
		for _, id := range slow {
			if r := rs[id]; r != nil {
				r.kickSlow()
			}
		}
	}
	p.mainLogTime.Store(txn.TimestampUnixNano)
	p.busyNanos.Add(int64(p.cfg.Now().Sub(start)))
	return nil
}

// progressTicks is how many times per ProgressInterval the ticker looks
// for idle targets. A target counts as idle once nothing was pushed to it
// for a whole ProgressInterval, so it gets at most one marker per interval
// either way; looking more often only shortens the wait of a target that
// has just become idle and behind: one a group member took over after a
// failover gets its marker within a quarter interval, not up to a whole
// one (bench player --group: "delivered" trailed "owned" by up to 1 s).
const progressTicks = 4

// ticker sends progress markers and samples the dispatch loop's
// saturation until ctx ends. It does no I/O, so a slow LogStore never
// delays a marker.
func (p *Player) ticker(ctx context.Context) {
	var progress <-chan time.Time
	if p.cfg.ProgressInterval > 0 {
		t := time.NewTicker(max(p.cfg.ProgressInterval/progressTicks, time.Millisecond))
		defer t.Stop()
		progress = t.C
	}
	sample := time.NewTicker(saturationInterval)
	defer sample.Stop()
	lastSample, lastBusy := time.Now(), int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-progress:
			p.progress()
		case now := <-sample.C:
			busy := p.busyNanos.Load()
			p.m.saturation.Set(min(1, float64(busy-lastBusy)/float64(now.Sub(lastSample))))
			lastSample, lastBusy = now, busy
		}
	}
}

// reporter reports the targets' acked LSNs to the LogStore every
// ReportInterval until ctx ends.
func (p *Player) reporter(ctx context.Context) {
	if p.cfg.ReportInterval <= 0 {
		return
	}
	t := time.NewTicker(p.cfg.ReportInterval)
	defer t.Stop()
	reported := map[*runner]types.LSN{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.report(ctx, reported)
		}
	}
}

// saturationInterval is the window over which the dispatch loop's busy
// fraction is measured.
const saturationInterval = time.Second

// progress pushes a progress marker to every idle target that is behind.
// It also ends any live stream whose target is suspended in the stream's
// term (a slow-target kick that found no conn): a safety net behind the
// check in runner.session, so such a target can never stay stuck.
func (p *Player) progress() {
	d := p.d.Load()
	now := p.cfg.Now().UnixNano()
	for id, r := range *p.runners.Load() {
		if d.Progress(id, now) {
			signal(r.wake)
		}
		r.mu.Lock()
		c := r.mu.conn
		r.mu.Unlock()
		if c != nil {
			r.kickIfSuspended(d, c)
		}
	}
}

// report sends each target's acked LSN to the LogStore when it changed
// since the last report (the retention floor). What was reported is kept
// per runner, not per id: a target removed and added again is a new
// runner, reported afresh (RemoveTarget may have dropped its consumer row).
// A target not handshaken by its runner yet reports the last LSN this
// Player reported for its id, if any (it was removed and added again: its
// floor must hold while it is down); one never heard from by this Player
// keeps the floor an earlier LogPlayer (or group member) reported.
func (p *Player) report(ctx context.Context, reported map[*runner]types.LSN) {
	d := p.d.Load()
	rs := *p.runners.Load()
	for r := range reported {
		if rs[r.cfg.ID] != r {
			delete(reported, r) // removed or replaced
		}
	}
	for id, r := range rs {
		r.mu.Lock()
		known := r.mu.handshaken
		r.mu.Unlock()
		st, ok := d.Stats(id)
		lsn := st.LastAck
		if !known || !ok {
			floor, had := p.floorOf(id)
			if !had {
				continue // never heard from: keeps the floor an earlier LogPlayer reported
			}
			lsn = floor
		}
		if last, ok := reported[r]; ok && (last == lsn || last == reportRefused) {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, reportTimeout)
		err := p.fetch.ReportConsumer(rctx, ConsumerName(id), lsn, false)
		cancel()
		if apierr.CodeOf(err) == logstorepb.ErrorCode_UNKNOWN_TARGET {
			// The registry no longer holds the target (`target remove`): the
			// store keeps no consumer row for it, and this runner is about
			// to be dropped with its assignment. Not reported again.
			reported[r] = reportRefused
			p.log.Info("the LogStore refused the target's acked LSN: the target is not registered; not reporting it again", "target", id, "lsn", lsn)
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("reporting a target's acked LSN to the LogStore failed", "target", id, "lsn", lsn, "err", err)
			}
			continue
		}
		reported[r] = lsn
		p.setFloor(id, r, lsn)
		if p.grp == nil && (*p.runners.Load())[id] != r {
			// RemoveTarget dropped the consumer while this report was on
			// its way and may have been overtaken by it: drop it again.
			// (RemoveTarget unpublishes the runner before dropping, so one
			// of the two drops comes after this report.)
			rctx, cancel := context.WithTimeout(ctx, reportTimeout)
			_ = p.fetch.ReportConsumer(rctx, ConsumerName(id), 0, true)
			cancel()
		}
	}
}

// waitReady waits until Run's start handshake ended. ErrNotRunning when Run
// was not called or returned.
func (p *Player) waitReady(ctx context.Context) error {
	p.admin.Lock()
	started, stopped := p.admin.started, p.admin.stopped
	p.admin.Unlock()
	if !started || stopped {
		return ErrNotRunning
	}
	select {
	case <-p.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("logplayer: waiting for the start handshake: %w", ctx.Err())
	}
}

// leaseHeld reports whether this Player may deliver now: always in
// single-player mode; for a group member, while its local lease deadline
// has not passed.
func (p *Player) leaseHeld() bool {
	if p.grp == nil || p.grp.cfg.noLeaseCheck {
		return true
	}
	return int64(time.Since(p.base)) < p.leaseUntil.Load()
}

// reportRefused marks, in report's map, a runner whose report the
// LogStore refused because its target is not registered.
const reportRefused = types.LSN(math.MaxUint64)

// ConsumerName is the LogStore delivery-consumer name of a target.
func ConsumerName(id string) string { return "logplayer/" + id }

// AddTarget adds a target at runtime. It starts from its own durable
// applied LSN (its handshake), recovering what it lacks from the LogStore.
// While Run's start handshake is in progress it waits for it (or ctx).
// Errors: ErrInvalidConfig, ErrDuplicateTarget, ErrNotRunning,
// ErrGroupManaged (a group member).
func (p *Player) AddTarget(ctx context.Context, tc TargetConfig) error {
	if p.grp != nil {
		return ErrGroupManaged
	}
	return p.addTarget(ctx, tc)
}

// addTarget is AddTarget (and the group member's way to take a target).
func (p *Player) addTarget(ctx context.Context, tc TargetConfig) error {
	if err := tc.Validate(); err != nil {
		return err
	}
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	p.admin.Lock()
	defer p.admin.Unlock()
	d := p.d.Load()
	if p.admin.stopped {
		return ErrNotRunning
	}
	if _, ok := (*p.runners.Load())[tc.ID]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateTarget, tc.ID)
	}
	if err := d.AddTarget(tc.ID, tc.Topics); err != nil {
		return err
	}
	if err := p.startRunnerLocked(p.admin.ctx, tc, nil); err != nil {
		d.RemoveTarget(tc.ID)
		return err
	}
	p.log.Info("target added", "target", tc.ID, "address", tc.Address, "topics", tc.Topics, "epoch", tc.Epoch)
	return nil
}

// RemoveTarget stops delivering to a target, forgets it, and drops its
// consumer from the LogStore's retention floor. Errors: ErrUnknownTarget,
// ErrNotRunning, ErrGroupManaged (a group member).
func (p *Player) RemoveTarget(ctx context.Context, id string) error {
	if p.grp != nil {
		return ErrGroupManaged
	}
	return p.removeTarget(ctx, id, true)
}

// removeTarget stops delivering to a target and forgets it; dropFloor also
// drops its retention consumer. A group member never drops it: the target
// moves to another member (which needs the floor while it connects), and
// the registry drops the row when the target is unregistered.
func (p *Player) removeTarget(ctx context.Context, id string, dropFloor bool) error {
	if err := p.waitReady(ctx); err != nil {
		return err
	}
	p.admin.Lock()
	d := p.d.Load()
	if p.admin.stopped {
		p.admin.Unlock()
		return ErrNotRunning
	}
	r := (*p.runners.Load())[id]
	if r == nil {
		p.admin.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownTarget, id)
	}
	rs := maps.Clone(*p.runners.Load())
	delete(rs, id)
	p.runners.Store(&rs)
	r.stop()
	d.RemoveTarget(id)
	p.m.removeTarget(id)
	p.forgetFloor(id)
	p.admin.Unlock()

	p.log.Info("target removed", "target", id)
	if !dropFloor {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := p.fetch.ReportConsumer(rctx, ConsumerName(id), 0, true); err != nil {
		return fmt.Errorf("logplayer: target %s removed, but dropping its retention consumer failed: %w", id, err)
	}
	return nil
}
