//go:build failpoints

package logstore

import (
	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/failpoint"
)

// withRaftFaults wraps the Raft log store so that the failpoint
// failpoint.RaftStoreLogs can fail or delay its appends (tests built with
// -tags failpoints only; raftstore_nofailpoint.go is the twin).
func withRaftFaults(s raftStore) raftStore {
	if m, ok := s.(raft.MonotonicLogStore); ok && m.IsMonotonic() {
		return monotonicFaultyRaftStore{faultyRaftStore{s}}
	}
	return faultyRaftStore{s}
}

type faultyRaftStore struct{ raftStore }

func (f faultyRaftStore) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func (f faultyRaftStore) StoreLogs(logs []*raft.Log) error {
	if err := failpoint.Inject(failpoint.RaftStoreLogs); err != nil {
		return err
	}
	return f.raftStore.StoreLogs(logs)
}

// monotonicFaultyRaftStore keeps raft-wal's raft.MonotonicLogStore visible
// to hashicorp/raft through the wrapper.
type monotonicFaultyRaftStore struct{ faultyRaftStore }

func (monotonicFaultyRaftStore) IsMonotonic() bool { return true }
