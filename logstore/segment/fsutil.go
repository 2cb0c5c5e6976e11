package segment

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// syncDir fsyncs a directory, making file creations, renames and removals in
// it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("segment: sync dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("segment: sync dir %s: %w", dir, err)
	}
	return nil
}

// writeFileDurable writes data to path through a temporary file, fsync and
// rename, then fsyncs the directory: afterwards path holds data or, after a
// crash in between, its old content (or nothing).
func writeFileDurable(path string, data []byte) error {
	tmp := path + tmpExt
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("segment: write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// copyPrefix writes the first n bytes of src to a new file at path (through a
// temporary file and rename), fsyncs it and the directory, and returns the
// new file opened read-write and the CRC-32C of its bytes.
func copyPrefix(path string, src io.ReaderAt, n int64) (*os.File, uint32, error) {
	tmp := path + tmpExt
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
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
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, 0, fmt.Errorf("segment: copy to %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, h.Sum32(), nil
}

// fileCRC returns the size and CRC-32C of a whole file.
func fileCRC(path string) (int64, uint32, error) {
	f, err := os.Open(path)
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
// the platform does not tell).
func linkCount(f *os.File) (uint64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("segment: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink), nil
	}
	return 1, nil
}

// errCrossDevice reports a hard link that the filesystem refused because the
// two paths are on different devices.
func isCrossDevice(err error) bool {
	return errors.Is(err, syscall.EXDEV)
}
