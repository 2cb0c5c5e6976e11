package segment

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to disk
// without waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE): dirty data
// then trickles out while the segment fills, and the fsync that seals it has
// little left to wait for. It gives no durability; errors are ignored (the
// seal's fsync reports real ones).
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
