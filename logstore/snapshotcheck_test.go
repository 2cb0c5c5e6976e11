package logstore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// snapshotTweak makes a node take a snapshot every 16 entries over 4 KiB
// segments (so snapshots hold sealed segments, links and a copy).
func snapshotTweak(cfg *logstore.Config) {
	cfg.SegmentBytes = 4 << 10
	cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 16, 4, 50*time.Millisecond
}

// newestSnapshotDir is the directory of the newest snapshot under dataDir.
func newestSnapshotDir(t testing.TB, dataDir string) string {
	t.Helper()
	var best string
	var bt, bi uint64
	for _, d := range snapshotDirs(t, dataDir) {
		term, index, ok := logstore.ParseSnapshotIDForTest(filepath.Base(d))
		if ok && (best == "" || term > bt || (term == bt && index > bi)) {
			best, bt, bi = d, term, index
		}
	}
	if best == "" {
		t.Fatalf("no snapshot under %s", dataDir)
	}
	return best
}

// copyTree copies the directory tree from into to (links become copies).
func copyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dataDirWithSnapshot runs a one-node cluster until it has a snapshot and
// some entries, stops it and returns its config (the data directory).
func dataDirWithSnapshot(t *testing.T) (logstore.Config, []string) {
	c := startCluster(t, 1, snapshotTweak)
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 60*time.Second)
	for i := range 80 {
		req := txnReq(fmt.Sprintf("t%03d", i)+strings.Repeat("x", 100), "a", fmt.Sprintf("b%d", i%3))
		req.OffsetCommits = []*logstorepb.OffsetCommit{{Group: "g", Topic: "a", Offset: uint64(i)}}
		if _, err := cl.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 60*time.Second, "a snapshot", func() bool { return len(snapshotDirs(t, c.Configs[0].Dir)) > 0 })
	addrs := c.addrs()
	c.stop(0)
	return c.Configs[0], addrs
}

// startOn opens a node on dir with cfg's settings and new listeners; nil
// error means it started (it is closed again).
func startOn(t *testing.T, cfg logstore.Config, dir string) error {
	rl := listen(t)
	cfg.Dir, cfg.RaftListener, cfg.RaftAddr = dir, rl, rl.Addr().String()
	n, err := logstore.NewNode(cfg)
	if err != nil {
		rl.Close()
		return err
	}
	n.Close()
	return nil
}

func flipAt(t testing.TB, path string, at func(size int) int, bit byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at(len(b))] ^= bit
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func editJSON(t testing.TB, path string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := decodeObject(t, b)
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// decodeObject decodes a JSON object, numbers as json.Number.
func decodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func addToNumber(m map[string]any, key string, delta int64) {
	n, _ := m[key].(json.Number).Int64()
	m[key] = n + delta
}

// TestChangedSnapshotFileRefusedAtStart changes one file of the newest
// snapshot of a stopped node (a bit flipped at several places of
// state.bin, manifest.json, meta.json and a restored archive's header; a
// raised Index in meta.json, a changed LSN in manifest.json) and starts a
// node on it: it must refuse, with one line naming the file.
func TestChangedSnapshotFileRefusedAtStart(t *testing.T) {
	cfg, addrs := dataDirWithSnapshot(t)
	template := cfg.Dir
	snap := newestSnapshotDir(t, template)
	rel := func(name string) string {
		r, _ := filepath.Rel(template, filepath.Join(snap, name))
		return r
	}
	first := func(int) int { return 0 }
	third := func(n int) int { return n / 3 }
	half := func(n int) int { return n / 2 }
	last := func(n int) int { return n - 1 }
	type change struct {
		file string // relative to the data directory
		do   func(path string)
	}
	cases := map[string]change{}
	for name, at := range map[string]func(int) int{"first": first, "third": third, "half": half, "last": last} {
		for _, bit := range []byte{0x01, 0x10} {
			cases[fmt.Sprintf("state.bin %s byte bit %#x", name, bit)] = change{rel("state.bin"), func(p string) { flipAt(t, p, at, bit) }}
		}
		cases["manifest.json "+name+" byte"] = change{rel("manifest.json"), func(p string) { flipAt(t, p, at, 0x01) }}
	}
	cases["meta.json Index raised"] = change{rel("meta.json"), func(p string) { editJSON(t, p, func(m map[string]any) { addToNumber(m, "Index", 5) }) }}
	cases["meta.json Index lowered"] = change{rel("meta.json"), func(p string) { editJSON(t, p, func(m map[string]any) { addToNumber(m, "Index", -5) }) }}
	cases["meta.json Term digit"] = change{rel("meta.json"), func(p string) {
		flipAt(t, p, func(int) int {
			b, _ := os.ReadFile(p)
			return bytes.Index(b, []byte(`"Term":`)) + len(`"Term":`)
		}, 0x02)
	}}
	// With valid checksums (an older binary's bug, or an edit resealed):
	// the parts must still describe one point of the log.
	cases["meta.json Index lowered, resealed"] = change{rel("meta.json"), func(p string) {
		if err := logstore.ResealSnapshotMetaForTest(filepath.Dir(p), func(m *raft.SnapshotMeta) { m.Index-- }); err != nil {
			t.Fatal(err)
		}
	}}
	// Below the state's index, and the directory renamed to match (the
	// only snapshot left).
	cases["meta.json Index below the state's, resealed and renamed"] = change{rel("meta.json"), func(p string) {
		dir := filepath.Dir(p)
		var man struct {
			LastRaftIndex uint64 `json:"last_raft_index"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err == nil {
			err = json.Unmarshal(b, &man)
		}
		if err != nil {
			t.Fatal(err)
		}
		var id string
		if err := logstore.ResealSnapshotMetaForTest(dir, func(m *raft.SnapshotMeta) {
			m.Index = man.LastRaftIndex - 1
			m.ID = fmt.Sprintf("%d-%d-1", m.Term, m.Index)
			id = m.ID
		}); err != nil {
			t.Fatal(err)
		}
		for _, other := range snapshotDirs(t, filepath.Dir(filepath.Dir(dir))) {
			if other != dir {
				os.RemoveAll(other)
			}
		}
		if err := os.Rename(dir, filepath.Join(filepath.Dir(dir), id)); err != nil {
			t.Fatal(err)
		}
	}}
	cases["manifest.json last_raft_index above the state's, resealed"] = change{rel("manifest.json"), func(p string) {
		if err := logstore.ResealManifestForTest(p, func(m *segment.Manifest) { m.LastRaftIndex += 1000 }); err != nil {
			t.Fatal(err)
		}
	}}
	cases["manifest.json last_lsn raised"] = change{rel("manifest.json"), func(p string) {
		editJSON(t, p, func(m map[string]any) { addToNumber(m, "last_lsn", 1) })
	}}

	// A restored backup is a snapshot of kind archive: its header.
	c2 := startCluster(t, 1, snapshotTweak)
	appendLoad(t, newClient(t, c2.addrs()...), 2, 20, "arch")
	backup := filepath.Join(t.TempDir(), "b.lpb")
	saveBackup(t, c2.addrs(), backup)
	archTemplate := filepath.Join(t.TempDir(), "restored")
	voters := []logstore.Peer{{ID: cfg.ID, RaftAddr: "127.0.0.1:1", APIAddr: addrs[0]}}
	if _, err := logstore.RestoreBackup(backup, archTemplate, voters); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(newestSnapshotDir(t, archTemplate), "archive.bin")
	hdrLen := archiveHeaderLen(t, archive)
	archRel, _ := filepath.Rel(archTemplate, archive)
	for name, at := range map[string]func(int) int{"state": func(int) int { return 20 }, "state middle": func(int) int { return hdrLen / 3 },
		"manifest": func(int) int { return hdrLen - 20 }} {
		cases["archive.bin "+name] = change{"A:" + archRel, func(p string) { flipAt(t, p, at, 0x01) }}
	}

	if err := startOn(t, cfg, copyOf(t, template)); err != nil {
		t.Fatalf("the unchanged copy does not start: %v", err)
	}
	if err := startOn(t, cfg, copyOf(t, archTemplate)); err != nil {
		t.Fatalf("the unchanged restored copy does not start: %v", err)
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			src, file := template, c.file
			if after, ok := strings.CutPrefix(file, "A:"); ok {
				src, file = archTemplate, after
			}
			dir := copyOf(t, src)
			c.do(filepath.Join(dir, file))
			err := startOn(t, cfg, dir)
			if err == nil {
				t.Fatalf("the node started on a changed %s", file)
			}
			if msg := err.Error(); !strings.Contains(msg, filepath.Base(file)) || strings.Contains(msg, "\n") {
				t.Fatalf("start refused with %q: want one line naming %s", msg, filepath.Base(file))
			}
			t.Logf("refused: %v", err)
		})
	}
}

func copyOf(t testing.TB, src string) string {
	dir := filepath.Join(t.TempDir(), "data")
	copyTree(t, src, dir)
	return dir
}

// archiveHeaderLen is the length of an archive's header (magic, state,
// manifest and what follows them up to the first segment file), from the
// manifest's file sizes.
func archiveHeaderLen(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var files int64
	i := bytes.Index(b, []byte(`"files":`))
	var m struct {
		Files []struct {
			Bytes int64 `json:"bytes"`
		} `json:"files"`
	}
	d := json.NewDecoder(bytes.NewReader(b[bytes.LastIndexByte(b[:i], '{'):]))
	if err := d.Decode(&m); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		files += f.Bytes
	}
	return len(b) - int(files)
}

// TestCrashLeftoversCleanedAtStart: a snapshot directory without meta.json
// (a reap interrupted in RemoveAll: data/ still links the log's segments)
// and restore.tmp / export.tmp in the node directory (a crash during an
// InstallSnapshot or a user snapshot) are removed at start; what is left
// on disk that no snapshot accounts for is in
// logstore_snapshot_orphan_bytes.
func TestCrashLeftoversCleanedAtStart(t *testing.T) {
	c := startCluster(t, 1, snapshotTweak)
	appendLoad(t, newClient(t, c.addrs()...), 2, 40, "left")
	dir := c.Configs[0].Dir
	testwait.For(t, 60*time.Second, "a snapshot", func() bool { return len(snapshotDirs(t, dir)) > 0 })
	c.stop(0)
	newest := newestSnapshotDir(t, dir)
	reaped := filepath.Join(dir, "snapshots", "1-1-1") // older than every snapshot: reap's victim
	linkSnapshotWithoutMeta(t, newest, reaped)
	stages := []string{filepath.Join(dir, "restore.tmp"), filepath.Join(dir, "export.tmp")}
	for _, s := range stages {
		if err := os.MkdirAll(s, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s, "00000000000000000001.seg"), make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.restart(0)
	for _, p := range append(stages, reaped) {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the start (%v)", p, err)
		}
	}
	// One appearing while the node runs (nothing removes it before the next
	// start) is counted.
	n := c.Nodes[0]
	orphan := filepath.Join(dir, "snapshots", "1-2-1")
	if err := os.MkdirAll(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan, "state.bin"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := n.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if got := testmetric.Value(t, n.Registry(), "logstore_snapshot_orphan_bytes", map[string]string{"node": "n0"}); got != 4096 {
		t.Fatalf("orphan bytes %v, want 4096", got)
	}
}

// linkSnapshotWithoutMeta makes dst look like snapshot src half removed:
// its data/ files hard-linked, state.bin and manifest.json copied, no
// meta.json.
func linkSnapshotWithoutMeta(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dst, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(src, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if err := os.Link(filepath.Join(src, "data", e.Name()), filepath.Join(dst, "data", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"state.bin", "manifest.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotFromBeforeChecksumsStarts: a data directory whose snapshots
// were written before format 2 (meta.json and manifest.json without
// "format", "crc32c" or "state_crc32c") still starts and gets back to its
// head.
func TestSnapshotFromBeforeChecksumsStarts(t *testing.T) {
	cfg, _ := dataDirWithSnapshot(t)
	dir := copyOf(t, cfg.Dir)
	for _, snap := range snapshotDirs(t, dir) {
		editJSON(t, filepath.Join(snap, "meta.json"), func(m map[string]any) {
			delete(m, "format")
			delete(m, "crc32c")
			delete(m, "state_crc32c")
		})
		editJSON(t, filepath.Join(snap, "manifest.json"), func(m map[string]any) { delete(m, "crc32c") })
	}
	rl := listen(t)
	cfg.Dir, cfg.RaftListener, cfg.RaftAddr = dir, rl, rl.Addr().String()
	n, err := logstore.NewNode(cfg)
	if err != nil {
		t.Fatalf("a snapshot from before checksums is refused: %v", err)
	}
	defer n.Close()
	testwait.For(t, 60*time.Second, "the head back at lsn 80", func() bool { return n.HeadLSN() >= 80 })
}
