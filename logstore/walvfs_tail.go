package logstore

import (
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	raftwal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	walsegment "github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/logplayer/logplayer/internal/vfs"
)

// openWALOnFS opens raft-wal in dir on fsys: segment files through walVFS,
// metadata and stable keys in a walMetaStore. It makes dir (and its path)
// durable first: raft-wal syncs the directory after its files, never the
// directory's own name in its parent.
func openWALOnFS(dir string, fsys vfs.FS, logger hclog.Logger) (*raftwal.WAL, error) {
	return openWALOnFSWith(dir, fsys, logger, newWALMetaStore(fsys), 0)
}

// openWALOnFSWith is openWALOnFS with a chosen MetaStore and segment size
// (0: raft-wal's default); tests use small segments and a MetaStore that
// blocks.
func openWALOnFSWith(dir string, fsys vfs.FS, logger hclog.Logger, meta types.MetaStore, segmentBytes int) (*raftwal.WAL, error) {
	if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("walvfs: %w", err)
	}
	return raftwal.Open(dir, raftwal.WithLogger(logger), raftwal.WithSegmentFiler(walsegment.NewFiler(dir, walVFS{fs: fsys})),
		raftwal.WithMetaStore(meta), raftwal.WithSegmentSize(segmentBytes))
}

// errSealedTail: the WAL in a directory is wedged on a sealed tail (see
// the top of walvfs.go); raft-wal v0.4.2 would open it and then refuse
// every append with ErrSealed.
var errSealedTail = errors.New("raft-wal tail segment is sealed but its metadata says unsealed (a crash during segment rotation)")

// sealedTailRecovery is the one line a node wedged on errSealedTail logs:
// what the operator does (README, Runbook).
const sealedTailRecovery = "remove the node from the cluster (logplayer cluster remove --id ID), " +
	"empty its data directory, start it and add it again (logplayer cluster add): it is rebuilt from the leader's snapshot"

// checkWALTail reports errSealedTail when the WAL in dir is wedged: the
// last segment of its metadata is unsealed, and recovering that segment's file
// (as raft-wal's Open does) finds it sealed. fsys == vfs.Default checks
// the layout raftwal.Open uses by default (bbolt metadata, os files);
// anything else the one openWALOnFS above uses. It changes nothing on disk
// (beyond creating raft-wal's empty metadata file when dir has none).
//
// Why refuse instead of repairing: completing the rotation (marking the
// tail sealed at its last index with its index offset, adding a new tail)
// is right when the seal's commit frame reached the disk, but raft-wal's
// recovery reports a segment sealed as soon as it reads an index frame,
// also when the commit after it was torn; then the index frame itself may
// be torn, and sealing the segment on it would serve garbage. raft-wal's
// API cannot tell the two apart.
func checkWALTail(dir string, fsys vfs.FS) error {
	var meta types.MetaStore
	var files types.VFS
	if fsys == vfs.Default {
		meta, files = &metadb.BoltMetaDB{}, walfs.New()
	} else {
		meta, files = newWALMetaStore(fsys), walVFS{fs: fsys}
	}
	st, err := meta.Load(dir)
	if cerr := meta.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("walvfs: load metadata: %w", err)
	}
	if len(st.Segments) == 0 {
		return nil
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		return nil
	}
	w, err := walsegment.NewFiler(dir, files).RecoverTail(tail)
	if errors.Is(err, os.ErrNotExist) {
		return nil // raft-wal creates it
	}
	if err != nil {
		return nil // raft-wal's Open reports it
	}
	sealed, _, err := w.Sealed()
	last := w.LastIndex()
	_ = w.Close()
	if err != nil || !sealed {
		return nil
	}
	return fmt.Errorf("%w: %s (entries %d..%d): %s", errSealedTail, walsegment.FileName(tail), tail.BaseIndex, last, sealedTailRecovery)
}
