package logstore

// RaftFirstIndexForTest returns the first index of n's Raft log store.
func RaftFirstIndexForTest(n *Node) (uint64, error) { return n.raftStore.FirstIndex() }
