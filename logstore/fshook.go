package logstore

import (
	"errors"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/vfs"
)

// errSnapshotsNeedRealFS is what a node on a Config.FS other than the real
// one answers to every snapshot: snapshot.go keeps its files on the real
// filesystem, but the segment checkpoint inside a snapshot is written
// through the segment log's FS, so such a snapshot would live half in each
// and could not be restored or sent.
var errSnapshotsNeedRealFS = errors.New("logstore: snapshots need the real filesystem (Config.FS is set)")

// raftSnapshots is the snapshot store Raft uses: snaps itself, or, on a
// Config.FS other than the real one, snaps refusing new snapshots (Raft
// logs the failure and keeps its log; a power-loss test keeps
// SnapshotThreshold and SnapshotInterval beyond its run).
func raftSnapshots(snaps *snapshotStore, fsys vfs.FS) raft.SnapshotStore {
	if fsys == nil || fsys == vfs.Default {
		return snaps
	}
	return noNewSnapshots{snaps}
}

type noNewSnapshots struct{ *snapshotStore }

func (noNewSnapshots) Create(raft.SnapshotVersion, uint64, uint64, raft.Configuration, uint64, raft.Transport) (raft.SnapshotSink, error) {
	return nil, errSnapshotsNeedRealFS
}
