package segment

import (
	"fmt"
	"github.com/logplayer/logplayer/internal/vfs"
	"path/filepath"
)

// Install replaces the log's content with the checkpoint described by m,
// whose files are in srcDir (ReadFiles wrote them there, or Checkpoint did).
// Local files identical to the manifest's (same name, size and CRC) are kept
// as they are (made durable first: the active segment is fsynced); the others
// are verified in srcDir (size and CRC) before anything changes, then
// hard-linked into the log's directory (the last segment, which the log will
// append to, is copied). A crash in the middle leaves a marker that makes
// Open discard the half-installed files (the log then starts empty, and the
// caller installs again). Readers in progress finish on the old files; srcDir
// is left as it was.
func (l *Log) Install(srcDir string, m Manifest) error {
	if err := m.validate(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	// A local file Install keeps stands for the leader's from then on, and
	// the leader's index may be linked beside it: it must be on disk first.
	// The sealed ones are once the sealer is done; the active one (kept
	// when it holds exactly a sealed segment of the leader's) was never
	// fsynced, so Sync it too, or a power loss could leave a durable index
	// over a torn segment that Open refuses.
	if err := l.Sync(); err != nil {
		return err
	}
	local := map[string]FileInfo{}
	for _, s := range l.mu.segs {
		local[segFileName(s.base)] = FileInfo{Name: segFileName(s.base), Bytes: s.size, CRC: s.crc}
		if s.sealed {
			local[idxFileName(s.base)] = FileInfo{Name: idxFileName(s.base), Bytes: s.idxSize, CRC: s.idxCRC}
		}
	}
	same := func(f FileInfo) bool {
		lf, ok := local[f.Name]
		return ok && lf.Bytes == f.Bytes && lf.CRC == f.CRC
	}
	for _, f := range m.Files {
		if !same(f) {
			if err := verifyFile(l.fs, filepath.Join(srcDir, f.Name), f); err != nil {
				return err
			}
		}
	}
	dir := l.opts.Dir
	if err := writeFileDurable(l.fs, filepath.Join(dir, installMarker), nil); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, f := range m.Files {
		keep[f.Name] = same(f)
	}
	for name := range local {
		if !keep[name] {
			if err := removeIfExists(l.fs, filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	for i, f := range m.Files {
		if keep[f.Name] {
			continue
		}
		src, dst := filepath.Join(srcDir, f.Name), filepath.Join(dir, f.Name)
		if err := removeIfExists(l.fs, dst); err != nil {
			return err
		}
		if i < len(m.Files)-1 {
			if err := l.fs.Link(src, dst); err == nil {
				continue
			} else if !vfs.IsCrossDevice(err) {
				return fmt.Errorf("segment: install: %w", err)
			}
		}
		in, err := l.fs.Open(src)
		if err != nil {
			return fmt.Errorf("segment: install: %w", err)
		}
		nf, crc, err := copyPrefix(l.fs, dst, in, f.Bytes)
		_ = in.Close()
		if err != nil {
			return err
		}
		_ = nf.Close()
		if crc != f.CRC {
			return fmt.Errorf("%w: install: %s changed while copied", ErrCorrupt, f.Name)
		}
	}
	if err := syncDir(l.fs, dir); err != nil {
		return err
	}
	if err := l.fs.Remove(filepath.Join(dir, installMarker)); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if err := syncDir(l.fs, dir); err != nil {
		return err
	}
	segs, err := l.load()
	if err != nil {
		return fmt.Errorf("segment: after install: %w", err)
	}
	l.setSegs(segs)
	l.log.Info("installed checkpoint", "first_lsn", m.FirstLSN, "lsn", m.LastLSN, "files", len(m.Files), "bytes", m.Bytes())
	return nil
}
