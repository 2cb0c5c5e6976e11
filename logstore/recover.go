package logstore

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// recoverCluster (Config.Recover, logplayer store --recover) is the way out
// of a quorum lost for good: on top of raft.RecoverCluster, it applies
// every entry of this node's Raft log after its newest snapshot to the FSM
// (the segment log and state move along), writes a new snapshot whose
// configuration is this node alone, and empties the Raft log. Raft then
// starts as a single-voter cluster that elects itself and can be grown
// again with cluster add.
//
// What can be lost: acknowledged writes that were committed by the lost
// voters but never reached this node. What can appear: entries this node
// held but that were never committed (their Append may have failed or timed
// out) are kept. Run it once, on one survivor, with the others gone for
// good; a node recovered twice shrinks its cluster to itself again.
func (n *Node) recoverCluster(rc *raft.Config, logs raft.LogStore) error {
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.ID), Address: n.transport.LocalAddr(),
	}}}
	before := n.fsm.head.Load()
	if err := raft.RecoverCluster(rc, recoveringFSM{n.fsm}, logs, n.raftStore, n.snaps, n.transport, conf); err != nil {
		return fmt.Errorf("logstore: recover cluster: %w", err)
	}
	n.log.Warn("recovered a lost quorum: this node is now the only voter; add the others with cluster add",
		"lsn_before", before, "lsn", n.fsm.head.Load())
	return nil
}
