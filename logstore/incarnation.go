package logstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/logstore/fsm"
)

// The log's identity (logstore/fsm/identity.go, docs/ARCHITECTURE.md "The
// log's identity"). The leader draws it and commits it; a backup restore
// (RestoreBackup) and a quorum recovery (recoverCluster) mark the state
// they start from with fsm.State.MarkNewIncarnation, so the next leader
// commits a new incarnation and the epoch counter is above every token
// issued before.

// ensureLogIdentity commits a log identity when the state needs one: no
// cluster id or incarnation yet (a new cluster, or one upgraded to
// fsm.IdentityVersion), or a restore or recovery marked it stale. Called by
// the leader's versionLoop; the cluster id is kept when set.
func (n *Node) ensureLogIdentity() {
	var need bool
	var clusterID string
	n.fsm.withState(func(st *fsm.State) {
		need = st.NeedsLogIdentity()
		clusterID, _, _ = st.LogIdentity()
	})
	if !need {
		return
	}
	if clusterID == "" {
		clusterID = randomID()
	}
	incarnation := randomID()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RaftTimeout)
	defer cancel()
	if _, err := n.agg.Submit(ctx, fsm.SetLogIdentityCommand(clusterID, incarnation), 16); err != nil {
		n.log.Warn("setting the log's identity", "err", err)
		return
	}
	n.fsm.withState(func(st *fsm.State) { clusterID, incarnation, _ = st.LogIdentity() })
	n.log.Info("log identity set", "cluster_id", clusterID, "incarnation", incarnation)
}

// randomID is 16 random hex digits.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// newIncarnation marks a state a restore or recovery starts from.
func newIncarnation(st *fsm.State) { st.MarkNewIncarnation() }

// recoveringFSM is the FSM raft.RecoverCluster applies the log to: its
// Snapshot, taken once every entry is applied, starts the new incarnation.
type recoveringFSM struct{ *raftFSM }

func (f recoveringFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.withState(newIncarnation)
	return f.raftFSM.Snapshot()
}
