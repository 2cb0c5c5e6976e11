package tier

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/logplayer/logplayer/internal/vfs"
)

// dirSnapshots is a SnapshotSource over directories of a temporary
// directory: the newest is the last one added.
type dirSnapshots struct {
	root string
	mu   sync.Mutex
	ids  []string
	done []string // SnapshotUploaded calls
}

func (d *dirSnapshots) add(t *testing.T, id string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(d.root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	d.ids = append(d.ids, id)
	d.mu.Unlock()
}

func (d *dirSnapshots) NewestSnapshot() (string, string, []string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ids) == 0 {
		return "", "", nil, false
	}
	id := d.ids[len(d.ids)-1]
	return id, filepath.Join(d.root, id), []string{"meta.json", "state.bin"}, true
}

func (d *dirSnapshots) SnapshotUploaded(id string) {
	d.mu.Lock()
	d.done = append(d.done, id)
	d.mu.Unlock()
}

func (d *dirSnapshots) uploaded() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.done...)
}

func (d *dirSnapshots) FS() vfs.FS { return vfs.Default }

// TestSnapshotUpload: with the store down nothing is reported uploaded;
// once it answers, the newest snapshot's files are in the tier byte for
// byte with upload.json last, and a newer snapshot is uploaded in turn. A
// restarted uploader finds the objects there and adopts them without
// uploading again.
func TestSnapshotUpload(t *testing.T) {
	f := newFakeS3(t)
	f.down.Store(true)
	l, _ := openLog(t, 0)
	snaps := &dirSnapshots{root: t.TempDir()}
	snaps.add(t, "1-10-1", map[string]string{"meta.json": `{"id":"1-10-1"}`, "state.bin": "state one"})
	tr := newTier(t, f)
	tr.SetSnapshots(snaps)
	run(t, tr, l)
	waitFor(t, "upload errors", func() bool { return tr.Stats().UploadErrors > 0 })
	if got := snaps.uploaded(); len(got) != 0 || tr.SnapshotUploaded() != "" {
		t.Fatalf("store down: reported uploaded %v", got)
	}
	f.down.Store(false)
	waitFor(t, "first snapshot uploaded", func() bool { return tr.SnapshotUploaded() == "1-10-1" })
	if got := string(getObject(t, tr, "cluster-a/snapshots/1-10-1/state.bin")); got != "state one" {
		t.Fatalf("state.bin in the tier: %q", got)
	}
	if !sameSnapshot(getObject(t, tr, "cluster-a/snapshots/1-10-1/upload.json"), &SnapshotManifest{ID: "1-10-1", Files: []SnapshotFile{
		{Name: "meta.json", Bytes: 15, SHA256: sha(`{"id":"1-10-1"}`)}, {Name: "state.bin", Bytes: 9, SHA256: sha("state one")}}}) {
		t.Fatal("upload.json does not list both files with their sums")
	}
	snaps.add(t, "1-20-2", map[string]string{"meta.json": `{"id":"1-20-2"}`, "state.bin": "state two"})
	waitFor(t, "second snapshot uploaded", func() bool { return tr.SnapshotUploaded() == "1-20-2" })
	if got := snaps.uploaded(); len(got) != 2 || got[0] != "1-10-1" || got[1] != "1-20-2" {
		t.Fatalf("SnapshotUploaded calls %v", got)
	}
	if st := tr.Stats(); st.UploadedSnapshots != 2 || st.UploadedBytes != 2*(15+9) {
		t.Fatalf("stats: %d snapshots, %d bytes", st.UploadedSnapshots, st.UploadedBytes)
	}

	again := newTier(t, f)
	again.SetSnapshots(snaps)
	run(t, again, l)
	waitFor(t, "restarted uploader adopts the snapshot", func() bool { return again.SnapshotUploaded() == "1-20-2" })
	if n := again.Stats().UploadedSnapshots; n != 0 {
		t.Fatalf("restarted uploader uploaded %d snapshots again", n)
	}
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
