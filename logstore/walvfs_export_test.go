package logstore

import (
	"github.com/hashicorp/raft-wal/types"

	"github.com/logplayer/logplayer/internal/vfs"
)

// The raft-wal adapter (walvfs.go, walvfs_tail.go) for powerloss_test.go.

// ErrSealedTailForTest is errSealedTail: the refusal of a raft-wal log
// wedged on a sealed tail.
var ErrSealedTailForTest = errSealedTail

// WALVFSForTest is raft-wal's segment filesystem on fsys (walVFS).
func WALVFSForTest(fsys vfs.FS) types.VFS { return walVFS{fs: fsys} }

// NewWALMetaStoreForTest is raft-wal's metadata store on fsys (walMetaStore).
func NewWALMetaStoreForTest(fsys vfs.FS) types.MetaStore { return newWALMetaStore(fsys) }

// CheckWALTailForTest is checkWALTail.
func CheckWALTailForTest(dir string, fsys vfs.FS) error { return checkWALTail(dir, fsys) }
