package logstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/vfs"
)

// TestRaftStoreNoEntriesBelowFirstIndex: after DeleteRange(1, 84) the Raft
// log store that NewNode hands to raft answers raft.ErrLogNotFound (the
// value itself: raft's replication.go compares with ==) for every index
// below FirstIndex, on both backends, on the real filesystem and on
// Config.FS, and again after a reopen. raft-wal v0.4.2 deletes only whole
// segment files, so before the fix its GetLog(1) returned entry 1 and a
// leader replayed the whole kept segment to a new or far-behind follower
// instead of sending it a snapshot.
func TestRaftStoreNoEntriesBelowFirstIndex(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend RaftLogStore
		fs      func() vfs.FS
	}{
		{"wal", RaftLogWAL, func() vfs.FS { return nil }},
		{"wal-memfs", RaftLogWAL, func() vfs.FS { return vfs.NewCrashableMem() }},
		{"boltdb", RaftLogBoltDB, func() vfs.FS { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, fsys := t.TempDir(), tc.fs()
			open := func() raftStore {
				s, err := openRaftStore(dir, tc.backend, hclog.NewNullLogger(), fsys)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			s := open()
			var logs []*raft.Log
			for i := uint64(1); i <= 100; i++ {
				logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "entry %d", i)})
			}
			if err := s.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(1, 84); err != nil {
				t.Fatal(err)
			}
			check := func(s raftStore) {
				t.Helper()
				if first, err := s.FirstIndex(); err != nil || first != 85 {
					t.Fatalf("FirstIndex = %d, %v; want 85", first, err)
				}
				if last, err := s.LastIndex(); err != nil || last != 100 {
					t.Fatalf("LastIndex = %d, %v; want 100", last, err)
				}
				for _, i := range []uint64{1, 2, 50, 84} {
					var l raft.Log
					if err := s.GetLog(i, &l); err != raft.ErrLogNotFound {
						t.Fatalf("GetLog(%d) below FirstIndex 85 = entry %d (%q), %v; want raft.ErrLogNotFound", i, l.Index, l.Data, err)
					}
				}
				for _, i := range []uint64{85, 100} {
					var l raft.Log
					if err := s.GetLog(i, &l); err != nil || l.Index != i || string(l.Data) != fmt.Sprintf("entry %d", i) {
						t.Fatalf("GetLog(%d) = entry %d (%q), %v", i, l.Index, l.Data, err)
					}
				}
				var l raft.Log
				if err := s.GetLog(101, &l); !errors.Is(err, raft.ErrLogNotFound) {
					t.Fatalf("GetLog(101) above LastIndex: %v; want raft.ErrLogNotFound", err)
				}
			}
			check(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open()
			defer s.Close()
			check(s)
			// raft-wal is a raft.MonotonicLogStore (raft resets it after
			// installing a snapshot); the wrapper must keep saying so.
			m, ok := s.(raft.MonotonicLogStore)
			if mono := ok && m.IsMonotonic(); mono != (tc.backend == RaftLogWAL) {
				t.Fatalf("MonotonicLogStore: %v; want %v", mono, tc.backend == RaftLogWAL)
			}
		})
	}
}
