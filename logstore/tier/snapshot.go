package tier

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/cenkalti/backoff/v4"

	"github.com/logplayer/logplayer/internal/vfs"
)

// Snapshots: with SetSnapshots, the uploader also copies the node's newest
// Raft snapshot, after the pending segments of each scan, under
//
//	snapshots/<id>/<file>         each of the snapshot's files, byte for byte
//	snapshots/<id>/upload.json    the SnapshotManifest: size and SHA-256 of each
//
// by the segments' rule: each file is read back and must match the local
// file's size and SHA-256, and the manifest is written (and read back)
// last, so a snapshot counts as uploaded exactly when its upload.json
// exists. The snapshot's segments (its data/ links) are the log's sealed
// segments, which the segment uploader copies. SnapshotUploaded is called
// once the copy is verified: the store may then reap snapshots older than
// that one.

// SnapshotSource is the node's snapshot store as the uploader sees it.
type SnapshotSource interface {
	// NewestSnapshot returns the newest snapshot's id, directory and the
	// names of its files to upload; ok is false when there is none.
	NewestSnapshot() (id, dir string, files []string, ok bool)
	// SnapshotUploaded says the tier holds snapshot id, verified.
	SnapshotUploaded(id string)
	// FS is the filesystem of dir.
	FS() vfs.FS
}

// SnapshotManifest is snapshots/<id>/upload.json.
type SnapshotManifest struct {
	ID         string         `json:"id"`
	Files      []SnapshotFile `json:"files"`
	UploadedBy string         `json:"uploaded_by,omitempty"`
}

// SnapshotFile is one uploaded file of a snapshot.
type SnapshotFile struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// SnapshotKey is the object key of file name of snapshot id under prefix
// (the URL's path, with its trailing slash).
func SnapshotKey(prefix, id, name string) string { return prefix + "snapshots/" + id + "/" + name }

// snapshotManifestName is the manifest's name among a snapshot's objects.
const snapshotManifestName = "upload.json"

// SetSnapshots makes Run upload src's newest snapshot too. Call it before
// Run.
func (t *Tier) SetSnapshots(src SnapshotSource) { t.snaps = src }

// SnapshotUploaded returns the id of the newest snapshot this node uploaded
// (or found uploaded) since it started; "" for none.
func (t *Tier) SnapshotUploaded() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.snapshot
}

// scanSnapshot uploads the newest snapshot when it is not uploaded yet.
func (t *Tier) scanSnapshot(ctx context.Context) {
	if t.snaps == nil {
		return
	}
	id, dir, files, ok := t.snaps.NewestSnapshot()
	if !ok || id == t.SnapshotUploaded() {
		return
	}
	err := t.retry(ctx, "snapshot upload", func() error {
		opCtx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
		defer cancel()
		return t.uploadSnapshot(opCtx, id, dir, files)
	})
	if err != nil {
		if ctx.Err() == nil {
			t.log.Warn("tier snapshot upload abandoned", "snapshot", id, "err", err)
		}
		return
	}
	t.mu.Lock()
	t.mu.snapshot = id
	t.mu.Unlock()
	t.snaps.SnapshotUploaded(id)
}

// uploadSnapshot copies snapshot id's files and verifies each by reading it
// back, then writes its manifest (read back too). A manifest already there
// with the same checksums is adopted.
func (t *Tier) uploadSnapshot(ctx context.Context, id, dir string, files []string) error {
	fsys := t.snaps.FS()
	m := &SnapshotManifest{ID: id, UploadedBy: t.cfg.Node}
	for _, name := range files {
		n, sum, err := hashFile(fsys, filepath.Join(dir, name))
		if err != nil {
			// Reaped or replaced since it was listed: the next scan
			// takes the newest again.
			return backoff.Permanent(err)
		}
		m.Files = append(m.Files, SnapshotFile{Name: name, Bytes: n, SHA256: sum})
	}
	b, err := json.Marshal(m)
	if err != nil {
		return backoff.Permanent(err)
	}
	key := SnapshotKey(t.loc.prefix, id, snapshotManifestName)
	if have, err := t.getSmall(ctx, key); err == nil && sameSnapshot(have, m) {
		t.log.Info("tier snapshot already uploaded", "snapshot", id)
		return nil
	}
	var total int64
	for _, f := range m.Files {
		if err := t.putVerified(ctx, fsys, filepath.Join(dir, f.Name), SnapshotKey(t.loc.prefix, id, f.Name), f.Bytes, f.SHA256); err != nil {
			return err
		}
		total += f.Bytes
	}
	if err := t.putSmallVerified(ctx, key, b); err != nil {
		return err
	}
	t.stats.uploadedBytes.Add(total)
	t.stats.uploadedSnaps.Add(1)
	t.log.Info("tier uploaded snapshot", "snapshot", id, "bytes", total)
	return nil
}

// sameSnapshot reports whether the manifest in b lists m's files with m's
// sizes and checksums.
func sameSnapshot(b []byte, m *SnapshotManifest) bool {
	var have SnapshotManifest
	if json.Unmarshal(b, &have) != nil || have.ID != m.ID || len(have.Files) != len(m.Files) {
		return false
	}
	for i, f := range have.Files {
		if f != m.Files[i] {
			return false
		}
	}
	return true
}
