package logstore

import "github.com/logplayer/logplayer/logstore/fsm"

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
