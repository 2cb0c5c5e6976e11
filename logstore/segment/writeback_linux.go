package segment

import (
	"golang.org/x/sys/unix"

	"github.com/logplayer/logplayer/internal/vfs"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to disk
// without waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE): dirty data
// then trickles out while the segment fills, and the fsync that seals it has
// little left to wait for. It gives no durability; errors are ignored (the
// seal's fsync reports real ones). A file without a descriptor (an
// in-memory filesystem's) is skipped.
func startWriteback(f vfs.File, off, n int64) {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		_ = unix.SyncFileRange(int(fd.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}
}
