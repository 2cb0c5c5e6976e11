package logstore

import (
	"path/filepath"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/tier"
)

// Snapshots in the tier (issue #29 item 2): with Config.Tier set, the tier's
// uploader copies the store's newest snapshot (its own files: meta.json,
// state.bin and manifest.json, or meta.json and archive.bin for one
// received from a leader; data/ holds the log's sealed segments, which it
// uploads as segments) and calls SnapshotUploaded once the copy is
// verified. Until then reap removes nothing: a snapshot beyond the newest
// retain is reaped only when it is the uploaded one or older than it, so
// with the object store down the snapshots pile up locally (like the
// segments retention keeps) instead of the newest state never reaching the
// tier. The uploaded id is kept in memory: after a restart the newest
// snapshot is uploaded again (or its objects adopted) before reap resumes.

var _ tier.SnapshotSource = (*snapshotStore)(nil)

// NewestSnapshot implements tier.SnapshotSource.
func (s *snapshotStore) NewestSnapshot() (id, dir string, files []string, ok bool) {
	metas, err := s.list()
	if err != nil || len(metas) == 0 {
		return "", "", nil, false
	}
	m := metas[0]
	files = []string{metaFile, stateFile, manifestFile}
	if m.Kind == kindArchive {
		files = []string{metaFile, archiveFile}
	}
	return m.ID, filepath.Join(s.dir, m.ID), files, true
}

// SnapshotUploaded implements tier.SnapshotSource: reap may now remove the
// snapshots older than id.
func (s *snapshotStore) SnapshotUploaded(id string) {
	s.mu.Lock()
	s.mu.uploaded = id
	s.mu.Unlock()
	s.reap()
}

// FS implements tier.SnapshotSource.
func (s *snapshotStore) FS() vfs.FS { return s.fs }

// reapable reports whether reap may remove metas[i] (metas newest first):
// always without a tier, else when the tier holds it or a newer snapshot.
func (s *snapshotStore) reapable(metas []snapMeta, i int) bool {
	if !s.tiered {
		return true
	}
	s.mu.Lock()
	up := s.mu.uploaded
	s.mu.Unlock()
	for _, m := range metas[:i+1] {
		if m.ID == up {
			return true
		}
	}
	return false
}
