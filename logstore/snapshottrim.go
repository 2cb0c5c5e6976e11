package logstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/segment"
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
		errs = append(errs, s.trimOne(m.ID, lsn))
		s.unlock(m.ID)
	}
	return errors.Join(errs...)
}

func (s *snapshotStore) trimOne(id string, lsn types.LSN) error {
	dir := filepath.Join(s.dir, id)
	b, err := vfs.ReadFile(s.fs, filepath.Join(dir, manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil // reaped since it was listed
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	var man segment.Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return fmt.Errorf("%w: %s: manifest: %w", ErrSnapshot, id, err)
	}
	trimmed, dropped := man.TrimBefore(lsn)
	if len(dropped) == 0 {
		return nil
	}
	mjson, err := json.Marshal(trimmed)
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
		b, err := vfs.ReadFile(fsys, filepath.Join(dir, manifestFile))
		if err != nil {
			continue // reaped since it was listed
		}
		var man segment.Manifest
		if err := json.Unmarshal(b, &man); err != nil {
			return 0, fmt.Errorf("%w: %s: manifest: %w", ErrSnapshot, m.ID, err)
		}
		for _, f := range man.Files[:max(len(man.Files)-1, 0)] {
			if fi, err := fsys.Stat(filepath.Join(dir, dataDir, f.Name)); err == nil {
				add(f.Name, fi)
			}
		}
	}
	return total, nil
}
