package logstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/logplayer/logplayer/internal/vfs"
)

// RaftLogStore names the backend that keeps Raft's log and stable state
// (current term, vote) in a node's data directory.
type RaftLogStore string

const (
	// RaftLogWAL is hashicorp/raft-wal: an append-only segmented log, one
	// fsync per appended batch. The default.
	RaftLogWAL RaftLogStore = "wal"
	// RaftLogBoltDB is hashicorp/raft-boltdb/v2: a copy-on-write B+tree,
	// two fdatasyncs per appended batch. Supported for existing clusters.
	RaftLogBoltDB RaftLogStore = "boltdb"

	// DefaultRaftLogStore is the backend of a node whose Config leaves
	// RaftLogStore empty.
	DefaultRaftLogStore = RaftLogWAL
)

// The files each backend owns inside Config.Dir. A data directory holds
// exactly one of them; openRaftStore refuses to start one backend over the
// other's files, so a node never starts empty over existing Raft state.
const (
	boltFile = "raft.db"  // raft-boltdb: log and stable store in one file
	walDir   = "raft-wal" // raft-wal: segment files + wal-meta.db (stable store)
)

// ErrRaftLogStoreMismatch is returned by NewNode when the data directory
// holds the Raft state of a different backend than Config.RaftLogStore.
var ErrRaftLogStoreMismatch = errors.New("logstore: data directory holds another Raft log store")

func (s RaftLogStore) valid() bool { return s == RaftLogWAL || s == RaftLogBoltDB }

// raftStore is a node's Raft log store and stable store. With both
// backends they are one object: raft-wal keeps term and vote in its
// wal-meta.db (bbolt, fsynced on every Set), raft-boltdb in its own file.
type raftStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// openRaftStore opens (or creates) the backend's files in dir after
// checking that dir holds no Raft state of the other backend.
// fsys is Config.FS (nil: the real filesystem).
func openRaftStore(dir string, backend RaftLogStore, logger hclog.Logger, fsys vfs.FS) (raftStore, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	boltPath, walPath := filepath.Join(dir, boltFile), filepath.Join(dir, walDir)
	hasBolt, err := exists(fsys, boltPath)
	if err != nil {
		return nil, err
	}
	hasWAL, err := exists(fsys, walPath)
	if err != nil {
		return nil, err
	}
	switch backend {
	case RaftLogBoltDB:
		if hasWAL {
			return nil, fmt.Errorf("%w: %s holds a raft-wal log (%s/); start the node with --raft-log-store %s",
				ErrRaftLogStoreMismatch, dir, walDir, RaftLogWAL)
		}
		s, err := raftboltdb.New(raftboltdb.Options{Path: boltPath})
		if err != nil {
			return nil, fmt.Errorf("logstore: open %s: %w", boltPath, err)
		}
		return withRaftFaults(s), nil
	case RaftLogWAL:
		if hasBolt {
			return nil, fmt.Errorf("%w: %s holds a raft-boltdb log (%s); start the node with --raft-log-store %s",
				ErrRaftLogStoreMismatch, dir, boltFile, RaftLogBoltDB)
		}
		if err := vfs.MkdirAllSync(fsys, walPath, 0o755); err != nil {
			return nil, fmt.Errorf("logstore: %w", err)
		}
		if err := checkWALTail(walPath, fsys); err != nil {
			return nil, fmt.Errorf("logstore: open %s: %w", walPath, err)
		}
		var w *raftwal.WAL
		if fsys == vfs.Default {
			w, err = raftwal.Open(walPath, raftwal.WithLogger(logger))
		} else {
			w, err = openWALOnFS(walPath, fsys, logger)
		}
		if err != nil {
			return nil, fmt.Errorf("logstore: open %s: %w", walPath, err)
		}
		return withRaftFaults(walLogStore{w}), nil
	}
	// Config.validate rejects anything else.
	panic(fmt.Sprintf("logstore: unknown Raft log store %q", backend))
}

// walLogStore is raft-wal as the Raft log store: GetLog answers
// raft.ErrLogNotFound for every index below FirstIndex.
//
// raft-wal v0.4.2 compacts logically: DeleteRange moves FirstIndex but
// removes only whole segment files (64 MiB), and its GetLog still returns
// the entries below FirstIndex that lie in a segment it keeps. hashicorp/raft
// sends a follower a snapshot only when reading the entries it needs fails
// with raft.ErrLogNotFound (replication.go:replicateTo after
// setupAppendEntries, compared with ==), so a new or far-behind follower was
// sent up to a segment of old log instead, and TrailingLogs did not bound
// it. raft-boltdb deletes compacted entries, so both backends now answer
// alike. A GetLog that races a DeleteRange may still return an entry just
// compacted: a true entry of the log, harmless.
//
// Nothing else reads below FirstIndex: raft reads from the snapshot's index
// on at start and in RecoverCluster (compaction keeps TrailingLogs before
// it), the node reads no Raft entry itself, and checkWALTail reads the
// segment files, not GetLog. *raftwal.WAL's IsMonotonic (raft resets a
// raft.MonotonicLogStore after installing a snapshot) is promoted.
type walLogStore struct{ *raftwal.WAL }

func (w walLogStore) GetLog(index uint64, l *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, l)
}

func exists(fsys vfs.FS, path string) (bool, error) {
	_, err := fsys.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("logstore: %w", err)
}
