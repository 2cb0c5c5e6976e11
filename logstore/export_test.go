package logstore

import "google.golang.org/protobuf/proto"

// FSMStateForTest returns n's FSM state as deterministic bytes and the Raft
// index it has applied through, read together.
func FSMStateForTest(n *Node) (stateBytes []byte, appliedIndex uint64) {
	n.fsm.withState(func(st *state) {
		var err error
		if stateBytes, err = (proto.MarshalOptions{Deterministic: true}).Marshal(st.toProto()); err != nil {
			panic(err)
		}
		appliedIndex = st.lastIndex
	})
	return stateBytes, appliedIndex
}

// GroupOffsetRowsForTest returns how many (group, topic) offsets n holds.
func GroupOffsetRowsForTest(n *Node) (rows int) {
	n.fsm.withState(func(st *state) { rows = len(st.groups) })
	return rows
}
