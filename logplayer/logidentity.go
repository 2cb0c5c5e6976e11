package logplayer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// What the Player knows of the log it delivers from (docs/ARCHITECTURE.md
// "The log's identity"): its identity, sent in every Hello so a target
// written from another log (another cluster, or the incarnation before a
// backup restore or quorum recovery) refuses it, and the highest head LSN
// it has seen, above which no target's position is ever taken: a HelloAck
// above the log's head is refused (LOG_BEHIND_TARGET), never skipped to.

// logIdentityVersion is the LogStore cluster version from which the leader
// gives the log an identity (logstore/fsm/identity.go IdentityVersion). A
// cluster at it without an identity is about to get one (just bootstrapped,
// or a restore's new incarnation is pending): the Player waits for it.
const logIdentityVersion = 4

// aheadChecks is how many times a HelloAck above the known head asks the
// LogStore again (a Status of any node, then every node's head: a follower
// may lag the leader) before the target is refused.
const aheadChecks = 3

// logIdentity is the log's identity as the LogStore reports it.
type logIdentity struct {
	clusterID, incarnation string
}

func (id logIdentity) String() string { return id.clusterID + "/" + id.incarnation }

// errLogChanged: the LogStore's identity changed under a running Player (it
// was restored or recovered): Run ends; a new Player handshakes afresh.
var errLogChanged = errors.New("logplayer: the log's identity changed (the LogStore was restored or recovered): restart the LogPlayer")

// loadLog reads the log's identity and head before the first Hello,
// waiting while a LogStore that gives identities has none yet.
func (p *Player) loadLog(ctx context.Context) error {
	wait := p.cfg.RetryInitial
	for {
		st, err := p.fetch.Status(ctx)
		if err != nil {
			return fmt.Errorf("logplayer: LogStore status: %w", err)
		}
		if err := p.observeStatus(st); err != nil {
			return err
		}
		if st.ClusterVersion < logIdentityVersion || (st.LogClusterId != "" && st.LogIncarnation != "") {
			return nil
		}
		p.log.Info("waiting for the LogStore leader to set the log's identity", "cluster_id", st.LogClusterId)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		wait = min(2*wait, p.cfg.RetryMax)
	}
}

// observeStatus records what a LogStore Status says of the log: a higher
// head, and its identity (errLogChanged when it differs from the one the
// Hellos already carry).
func (p *Player) observeStatus(st *logstorepb.StatusResponse) error {
	p.raiseHead(st.HeadLsn)
	if st.LogClusterId == "" || st.LogIncarnation == "" {
		return nil
	}
	id := logIdentity{clusterID: st.LogClusterId, incarnation: st.LogIncarnation}
	if old := p.logID.Swap(&id); old != nil && *old != id {
		p.log.Error("the log's identity changed under this LogPlayer", "was", old.String(), "now", id.String())
		p.fail(errLogChanged)
		return errLogChanged
	}
	return nil
}

// raiseHead records head as the log's known head if it is higher.
func (p *Player) raiseHead(head uint64) {
	for {
		h := p.logHead.Load()
		if head <= h || p.logHead.CompareAndSwap(h, head) {
			return
		}
	}
}

// checkNotAhead refuses a target whose applied LSN is above the log's head
// (LOG_BEHIND_TARGET, permanent: the log was restored or recovered behind
// it); the head is asked again first, in case the one known is old.
func (p *Player) checkNotAhead(ctx context.Context, id string, applied types.LSN) error {
	for attempt := 0; ; attempt++ {
		head := types.LSN(p.logHead.Load())
		if d := p.d.Load(); d != nil {
			head = max(head, d.CurrentLSN())
		}
		if applied <= head {
			return nil
		}
		if attempt == aheadChecks {
			return fmt.Errorf("%w: %w", errBlocked, apierr.New(logstorepb.ErrorCode_LOG_BEHIND_TARGET,
				fmt.Sprintf("target %s says it applied lsn %d, above the log's head %d: the log was restored or recovered "+
					"behind the target (or the target was written from another log); not delivering to it: re-seed the "+
					"target, see the README (restore and recovery)", id, applied, head),
				func(d *logstorepb.ErrorDetail) { d.AppliedLsn, d.LogHeadLsn = uint64(applied), uint64(head) }))
		}
		st, err := p.fetch.Status(ctx)
		if err != nil {
			return fmt.Errorf("logplayer: LogStore status: %w", err)
		}
		if err := p.observeStatus(st); err != nil {
			return err
		}
		// The refusal is permanent: rest it on the highest head any node
		// reports, not on the one node that answered (a follower that lags,
		// such as one installing a snapshot after a restart).
		if h, ok := p.fetch.MaxHead(ctx); ok {
			p.raiseHead(uint64(h))
		}
	}
}

// helloLog is the log identity a Hello carries (empty before the LogStore
// gave one).
func (p *Player) helloLog() logIdentity {
	if id := p.logID.Load(); id != nil {
		return *id
	}
	return logIdentity{}
}
