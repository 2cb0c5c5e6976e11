package logstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/types"
)

// Retention and snapshots share the disk: a local snapshot hard-links the
// sealed segments it was taken with, so deleting a segment from the log
// frees nothing while a snapshot still links it. trimBefore drops those
// links, so retention frees what it says it frees, on an idle cluster too
// (no newer snapshot is needed for it).

// trimBefore removes from every local, unpinned snapshot the sealed
// segments whose records all lie below lsn (the log's first retained LSN
// after retention), rewriting its manifest first (durably) and then
// removing the files: a crash in between leaves extra files, never a
// manifest naming a missing one. A snapshot being streamed is skipped and
// trimmed by a later retention run. Snapshots received from a leader as one
// archive file are left as they are (reap removes them once newer local
// snapshots exist).
func (s *snapshotStore) trimBefore(lsn types.LSN) error {
	metas, err := s.list()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range metas {
		if m.Kind != kindLocal || !s.lock(m.ID) {
			continue
		}
		errs = append(errs, s.trimOne(m, lsn))
		s.unlock(m.ID)
	}
	s.countOrphans()
	return errors.Join(errs...)
}

func (s *snapshotStore) trimOne(m snapMeta, lsn types.LSN) error {
	id := m.ID
	dir := filepath.Join(s.dir, id)
	if _, err := s.fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil // reaped since it was listed
	}
	_, man, err := s.readManifest(m)
	if err != nil {
		return err
	}
	trimmed, dropped := man.TrimBefore(lsn)
	if len(dropped) == 0 {
		return nil
	}
	mjson, err := trimmed.Marshal()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if err := replaceFileSync(s.fs, dir, manifestFile, mjson); err != nil {
		return err
	}
	for _, f := range dropped {
		if err := s.fs.Remove(filepath.Join(dir, dataDir, f.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
	}
	s.log.Info("retention trimmed snapshot", "snapshot", id, "first_lsn", trimmed.FirstLSN, "files", len(dropped))
	if err := vfs.SyncDir(s.fs, filepath.Join(dir, dataDir)); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return nil
}

// replaceFileSync atomically replaces dir/name with b: a temporary file,
// fsync, rename, fsync of dir.
func replaceFileSync(fsys vfs.FS, dir, name string, b []byte) error {
	tmp := filepath.Join(dir, name+tmpSuffix)
	if err := writeFileSync(fsys, tmp, b); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if err := vfs.SyncDir(fsys, dir); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return nil
}

// segmentDiskBytes is the segment data on disk that retention answers
// for: the log directory's files plus the sealed segment files (and
// indexes) that only local snapshots still hold, links to segments
// retention deleted while the snapshot was pinned; each file is counted
// once however many names it has. Not counted: a snapshot's last segment
// when the log no longer links it (the copy of the segment prefix that was
// active when it was taken), which trimming cannot free (reap does, at
// most one segment per retained snapshot), so retention never deletes
// more of the log to make up for it.
func (n *Node) segmentDiskBytes() (int64, error) {
	fsys := n.seg.FS()
	counted := map[string][]os.FileInfo{} // by name: links are found among same-named files
	var total int64
	add := func(name string, fi os.FileInfo) {
		for _, other := range counted[name] {
			if vfs.SameFile(fi, other) {
				return
			}
		}
		counted[name] = append(counted[name], fi)
		total += fi.Size()
	}
	segDir := filepath.Join(n.cfg.Dir, "segments")
	names, err := fsys.ReadDir(segDir)
	if err != nil {
		return 0, fmt.Errorf("logstore: %w", err)
	}
	for _, name := range names {
		if fi, err := fsys.Stat(filepath.Join(segDir, name)); err == nil && fi.Mode().IsRegular() {
			add(name, fi)
		}
	}
	metas, err := n.snaps.list()
	if err != nil {
		return 0, err
	}
	for _, m := range metas {
		if m.Kind != kindLocal {
			continue
		}
		dir := filepath.Join(n.snaps.dir, m.ID)
		_, man, err := n.snaps.readManifest(m)
		if err != nil {
			if _, serr := fsys.Stat(dir); serr != nil {
				continue // reaped since it was listed
			}
			return 0, err
		}
		for _, f := range man.Files[:max(len(man.Files)-1, 0)] {
			if fi, err := fsys.Stat(filepath.Join(dir, dataDir, f.Name)); err == nil {
				add(f.Name, fi)
			}
		}
	}
	return total, nil
}
