package segment

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/internal/vfs"
)

// syncDir fsyncs a directory, making file creations, renames and removals in
// it durable.
func syncDir(fs vfs.FS, dir string) error {
	if err := failpoint.Inject(failpoint.SegmentSyncDir); err != nil {
		return fmt.Errorf("segment: sync dir %s: %w", dir, err)
	}
	if err := vfs.SyncDir(fs, dir); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// writeFileDurable writes data to path through a temporary file, fsync and
// rename, then fsyncs the directory: afterwards path holds data or, after a
// crash in between, its old content (or nothing).
func writeFileDurable(fs vfs.FS, path string, data []byte) error {
	tmp := path + tmpExt
	err := vfs.WriteFileSync(fs, tmp, data, segmentSyncPoint)
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("segment: write %s: %w", path, err)
	}
	return syncDir(fs, filepath.Dir(path))
}

func segmentSyncPoint() error { return failpoint.Inject(failpoint.SegmentSync) }

// copyPrefix writes the first n bytes of src to a new file at path (through a
// temporary file and rename), fsyncs it and the directory, and returns the
// new file opened read-write and the CRC-32C of its bytes.
func copyPrefix(fs vfs.FS, path string, src io.ReaderAt, n int64) (vfs.File, uint32, error) {
	tmp := path + tmpExt
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("segment: %w", err)
	}
	h := crc32.New(crcTable)
	_, err = io.Copy(io.MultiWriter(f, h), io.NewSectionReader(src, 0, n))
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil && fi.Size() != n {
			err = fmt.Errorf("copied %d bytes, want %d", fi.Size(), n)
		}
	}
	if err == nil {
		err = failpoint.Inject(failpoint.SegmentSync)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err != nil {
		_ = f.Close()
		_ = fs.Remove(tmp)
		return nil, 0, fmt.Errorf("segment: copy to %s: %w", path, err)
	}
	if err := syncDir(fs, filepath.Dir(path)); err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, h.Sum32(), nil
}

// fileCRC returns the size and CRC-32C of a whole file.
func fileCRC(fs vfs.FS, path string) (int64, uint32, error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("segment: %w", err)
	}
	defer f.Close()
	h := crc32.New(crcTable)
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, 0, fmt.Errorf("segment: read %s: %w", path, err)
	}
	return n, h.Sum32(), nil
}

// linkCount returns how many directory entries name the open file (1 when
// the filesystem does not tell).
func linkCount(f vfs.File) (uint64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("segment: %w", err)
	}
	return vfs.LinkCount(fi), nil
}
