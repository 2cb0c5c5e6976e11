package logplayer

import (
	"slices"
	"strings"
	"time"

	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// TargetStatus is one target's delivery state (admin ListTargets, metrics).
type TargetStatus struct {
	TargetConfig
	// State is the target queue's state: N, RF, FC or S ("" before the
	// start handshake ended).
	State     string
	Term      types.Term
	Connected bool
	// Blocked: the last stream ended with a permanent refusal (or a recovery
	// below retention); the LogPlayer retries only every PermanentRetry.
	Blocked     bool
	LastError   string
	Incarnation string
	// LastAck is the target's durable applied LSN as last acked.
	LastAck    types.LSN
	CurrentLSN types.LSN
	LagEntries uint64
	// LagSeconds is the log time between the newest dispatched transaction
	// and the newest one the target acked; for a target that acked nothing
	// since this LogPlayer started, the time since it started.
	LagSeconds                float64
	NormalDepth, CatchupDepth int
	NormalBytes, CatchupBytes int64
	InFlightBatches           int
	InFlightBytes             int64
	// Counters since the target was added to this LogPlayer.
	Returns, Suspends, SlowSuspends, StaleDrops, ProgressMarkers uint64
	// HelloEpoch is the epoch of the target's streams: the Player's, or a
	// group member's fencing token for it.
	HelloEpoch types.Epoch
}

// GroupStatus is a group member's view of its membership.
type GroupStatus struct {
	Group, MemberID, Incarnation string
	// LeaseRemaining is the time left to the local lease deadline (≤ 0:
	// lapsed, not delivering).
	LeaseRemaining time.Duration
	Lease          time.Duration
	Generation     uint64
	// Renewals, Lapses, Gained and Lost count since the member started.
	Renewals, Lapses, Gained, Lost uint64
	// LastLapse is when the lease last lapsed (zero: never).
	LastLapse time.Time
	LastError string
}

// Group returns the group membership, or false in single-player mode.
func (p *Player) Group() (GroupStatus, bool) {
	g := p.grp
	if g == nil {
		return GroupStatus{}, false
	}
	s := GroupStatus{Group: g.cfg.Name, MemberID: g.cfg.MemberID, Incarnation: g.cfg.Incarnation}
	if until := p.leaseUntil.Load(); until > 0 {
		s.LeaseRemaining = time.Duration(until) - g.since()
	}
	g.st.Lock()
	defer g.st.Unlock()
	s.Lease, s.Generation = time.Duration(g.st.leaseNanos), g.st.generation
	s.Renewals, s.Lapses, s.Gained, s.Lost = g.st.renewals, g.st.lapses, g.st.gained, g.st.lost
	s.LastError, s.LastLapse = g.st.lastErr, g.st.lastLapse
	return s, true
}

// Targets returns the status of every target, sorted by id.
func (p *Player) Targets() []TargetStatus {
	d := p.d.Load()
	now := p.cfg.Now()
	var out []TargetStatus
	for _, r := range *p.runners.Load() {
		s := TargetStatus{TargetConfig: r.cfg, HelloEpoch: r.epoch()}
		r.mu.Lock()
		c := r.mu.conn
		s.Connected = c != nil
		s.Blocked = r.mu.blocked
		s.LastError = r.mu.lastErr
		s.Incarnation = r.mu.incarnation
		r.mu.Unlock()
		if c != nil {
			s.InFlightBatches, s.InFlightBytes = c.window()
		}
		if d != nil {
			if st, ok := d.Stats(r.cfg.ID); ok {
				s.fill(st.State, st.Term, st.LastAck, st.CurrentLSN)
				s.NormalDepth, s.CatchupDepth = st.NormalLen, st.CatchupLen
				s.NormalBytes, s.CatchupBytes = st.NormalBytes, st.CatchupBytes
				s.Returns, s.Suspends, s.SlowSuspends = st.Returns, st.Suspends, st.SlowSuspends
				s.StaleDrops, s.ProgressMarkers = st.StaleDrops, st.ProgressMarkers
			}
		}
		if s.LagEntries > 0 {
			if at := r.ackLogTime.Load(); at != 0 {
				s.LagSeconds = max(0, float64(p.mainLogTime.Load()-at)/1e9)
			} else {
				s.LagSeconds = now.Sub(r.startedAt).Seconds()
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b TargetStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (s *TargetStatus) fill(state targetqueue.State, term types.Term, lastAck, current types.LSN) {
	s.State, s.Term, s.LastAck, s.CurrentLSN = state.String(), term, lastAck, current
	if current > lastAck {
		s.LagEntries = uint64(current - lastAck)
	}
}

// CurrentLSN returns the LSN of the last transaction the main stream
// dispatched (0 before the start handshake ended).
func (p *Player) CurrentLSN() types.LSN {
	if d := p.d.Load(); d != nil {
		return d.CurrentLSN()
	}
	return 0
}
