// Package failpoint injects disk faults (an error, a delay) at named points
// of the storage code, for tests. The points are compiled in only with the
// build tag failpoints (go test -tags failpoints ./...); without it Inject is
// an empty function that returns nil, which the compiler inlines away, and
// Enable does not exist, so no production binary can turn a fault on.
//
// etcd's gofail is the model, without its source rewriting: a point is one
// call,
//
//	if err := failpoint.Inject(failpoint.SegmentSync); err != nil {
//		return err
//	}
//
// placed right before the operation it fails. The names are the constants
// below, one per kind of I/O, so a test names what it breaks.
package failpoint

// Points.
const (
	// SegmentWrite: before the segment log writes records (AppendBatch).
	SegmentWrite = "segment/write"
	// SegmentSync: before every file fsync of the segment log (a sealed
	// segment, the active one in Sync, an index or copied file).
	SegmentSync = "segment/sync"
	// SegmentSyncDir: before every directory fsync of the segment log.
	SegmentSyncDir = "segment/syncdir"
	// SnapshotSync: before the LogStore's snapshot writer fsyncs a file of
	// a snapshot (logstore/snapshot.go).
	SnapshotSync = "snapshot/sync"
	// RaftStoreLogs: before the Raft log store (raft-wal or raft-boltdb)
	// appends entries (logstore/raftstore_failpoint.go wraps it).
	RaftStoreLogs = "raft/storelogs"
	// ShardCommit: inside the shard's bbolt write transaction of an Apply,
	// after its writes (an error rolls it back, as a failed commit or
	// fdatasync does).
	ShardCommit = "shard/commit"
)
