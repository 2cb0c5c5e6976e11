package logstore

import (
	"fmt"
	"io"

	"github.com/logplayer/logplayer/logstore/fsm"
)

// FSMStateForTest returns n's FSM state as deterministic bytes and the Raft
// index it has applied through, read together.
func FSMStateForTest(n *Node) (stateBytes []byte, appliedIndex uint64) {
	n.fsm.withState(func(st *fsm.State) {
		var err error
		if stateBytes, err = fsm.MarshalState(st.ToProto()); err != nil {
			panic(err)
		}
		appliedIndex = st.LastIndex()
	})
	return stateBytes, appliedIndex
}

// GroupOffsetRowsForTest returns how many (group, topic) offsets n holds.
func GroupOffsetRowsForTest(n *Node) (rows int) {
	n.fsm.withState(func(st *fsm.State) { rows = st.GroupOffsetRows() })
	return rows
}

// OpenNewestSnapshotForTest opens n's newest snapshot as Raft would to
// stream it to a follower: its id, size and archive reader.
func OpenNewestSnapshotForTest(n *Node) (id string, size int64, rc io.ReadCloser, err error) {
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return "", 0, nil, fmt.Errorf("no snapshot (%v)", err)
	}
	m, rc, err := n.snaps.Open(metas[0].ID)
	if err != nil {
		return "", 0, nil, err
	}
	return m.ID, m.Size, rc, nil
}

// SnapshotIDsForTest lists n's snapshot ids, newest first.
func SnapshotIDsForTest(n *Node) []string {
	metas, err := n.snaps.List()
	if err != nil {
		panic(err)
	}
	var ids []string
	for _, m := range metas {
		ids = append(ids, m.ID)
	}
	return ids
}
