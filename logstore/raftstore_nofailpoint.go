//go:build !failpoints

package logstore

// withRaftFaults returns s: failpoints are compiled out (see
// raftstore_failpoint.go).
func withRaftFaults(s raftStore) raftStore { return s }
