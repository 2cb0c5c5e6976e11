package fsm

import (
	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// The log's identity (docs/ARCHITECTURE.md "The log's identity"): a cluster
// id chosen once, when the cluster first runs at IdentityVersion, and an
// incarnation replaced after every backup restore and quorum recovery.
// LogPlayers send it in their Hellos; a target stores it with its State and
// refuses a Hello from another log, so a log restored behind a target (its
// LSNs reused for other transactions) is never delivered over the target's
// data.
//
// Both parts are random, drawn by the leader (logstore/incarnation.go) and
// committed with SetLogIdentity, so every replica holds the same. A restore
// or recovery rewrites the state offline (MarkNewIncarnation): it marks the
// identity stale, and the first leader after it commits a new incarnation.
// Apply keeps a part that is set and not stale: the first SetLogIdentity
// wins, so two leaders racing to set it leave one identity.

// IdentityVersion is the cluster version that introduced the log identity.
const IdentityVersion uint32 = 4

// EpochSafetyMargin is what a restore or recovery adds to the epoch counter
// (NextEpoch, and the PlayerGroup tokens drawn from it). The restored state
// may be older than tokens already issued (issued after the backup, or
// committed by voters a recovery lost), and a LogPlayer whose epoch is not
// above a target's saved one stays fenced. Nothing outside the lost state
// records the highest token issued, so the counter jumps by more than any
// cluster issues between a backup and its restore: 2^32 tokens is one per
// millisecond for 49 days of nothing but NextEpoch calls, where a cluster
// issues one per LogPlayer start or ownership change. The counter still has
// room for 2^31 restores.
const EpochSafetyMargin types.Epoch = 1 << 32

// LogIdentity is the log's identity: the cluster id and incarnation ("" while
// not set), and stale when a restore or recovery asked for a new
// incarnation the leader has not committed yet.
func (s *State) LogIdentity() (clusterID, incarnation string, stale bool) {
	return s.logClusterID, s.logIncarnation, s.logIdentityStale
}

// NeedsLogIdentity reports whether the leader must commit SetLogIdentity.
func (s *State) NeedsLogIdentity() bool {
	return s.ClusterVersion() >= IdentityVersion && (s.logClusterID == "" || s.logIncarnation == "" || s.logIdentityStale)
}

// MarkNewIncarnation is what a backup restore or a quorum recovery does to
// the state it starts from (offline, before Raft runs): the incarnation
// becomes stale (the next leader replaces it) and the epoch counter jumps by
// EpochSafetyMargin, so no token issued before is issued again.
func (s *State) MarkNewIncarnation() {
	s.logIdentityStale = true
	s.epoch += EpochSafetyMargin
}

// SetLogIdentityCommand is the command that gives the log clusterID (kept
// when one is set) and a new incarnation (taken when none is set or it is
// stale).
func SetLogIdentityCommand(clusterID, incarnation string) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_SetLogIdentity{SetLogIdentity: &logstorepb.SetLogIdentity{
		ClusterId: clusterID, Incarnation: incarnation}}}
}

func (m *Machine) applySetLogIdentity(r *logstorepb.SetLogIdentity) Result {
	st := m.st
	if r.ClusterId == "" || r.Incarnation == "" || len(r.ClusterId) > maxIdentityLen || len(r.Incarnation) > maxIdentityLen {
		return Result{Err: apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT,
			"logstore: log identity needs a cluster id and an incarnation of 1..%d bytes", maxIdentityLen)}
	}
	if st.logClusterID == "" {
		st.logClusterID = r.ClusterId
	}
	if st.logIncarnation == "" || st.logIdentityStale {
		st.logIncarnation, st.logIdentityStale = r.Incarnation, false
	}
	return Result{Resp: &logstorepb.AddVoterResponse{}}
}

// maxIdentityLen bounds each part of the identity (the leader draws 16 hex
// digits).
const maxIdentityLen = 64

func (s *State) identityToProto(p *logstorepb.FSMState) {
	p.LogClusterId, p.LogIncarnation, p.LogIdentityStale = s.logClusterID, s.logIncarnation, s.logIdentityStale
}

func (s *State) identityFromProto(p *logstorepb.FSMState) {
	s.logClusterID, s.logIncarnation, s.logIdentityStale = p.LogClusterId, p.LogIncarnation, p.LogIdentityStale
}
