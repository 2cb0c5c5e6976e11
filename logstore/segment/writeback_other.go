//go:build !linux

package segment

import "github.com/logplayer/logplayer/internal/vfs"

// startWriteback is a no-op where sync_file_range does not exist: the seal's
// fsync writes the whole segment.
func startWriteback(vfs.File, int64, int64) {}
