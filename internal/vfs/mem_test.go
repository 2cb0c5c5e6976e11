package vfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"testing"
)

func write(t *testing.T, fs FS, name string, data []byte, sync bool) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashClone: what was fsynced (data by the file's Sync, names by the
// directory's) always survives; what was not may be lost, may survive as any
// prefix, and across seeds both happen.
func TestCrashClone(t *testing.T) {
	var lost, kept, torn, renamedOld, renamedNew int
	for seed := range uint64(200) {
		m := NewCrashableMem()
		if err := MkdirAllSync(m, "/d", 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, m, "/d/durable", []byte("durable"), true)
		if err := SyncDir(m, "/d"); err != nil {
			t.Fatal(err)
		}
		f, err := m.OpenFile("/d/durable", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(" and more"), 7); err != nil {
			t.Fatal(err)
		}
		write(t, m, "/d/new", []byte("synced data, unsynced name"), true)
		write(t, m, "/d/tmp", []byte("renamed"), true)
		if err := m.Rename("/d/tmp", "/d/final"); err != nil {
			t.Fatal(err)
		}
		c := m.CrashClone(rand.New(rand.NewPCG(seed, 1)))
		got, err := ReadFile(c, "/d/durable")
		if err != nil {
			t.Fatalf("seed %d: durable file lost: %v", seed, err)
		}
		full := []byte("durable and more")
		if !bytes.HasPrefix(full, got) || len(got) < len("durable") {
			t.Fatalf("seed %d: durable file holds %q", seed, got)
		}
		switch len(got) {
		case len("durable"):
			lost++
		case len(full):
			kept++
		default:
			torn++
		}
		_, errOld := c.Stat("/d/tmp")
		_, errNew := c.Stat("/d/final")
		// The creation of tmp was not made durable either: it may be
		// gone, but never both names at once.
		if errOld == nil && errNew == nil {
			t.Fatalf("seed %d: rename not atomic: both names exist", seed)
		}
		if errOld == nil {
			renamedOld++
		} else if errNew == nil {
			renamedNew++
		}
		if b, err := ReadFile(c, "/d/new"); err == nil && string(b) != "synced data, unsynced name" {
			t.Fatalf("seed %d: synced data reads %q", seed, b)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		// The dead process's filesystem goes on without touching the clone.
		if _, err := f.WriteAt([]byte("X"), 0); err != nil {
			t.Fatal(err)
		}
		if b, _ := ReadFile(c, "/d/durable"); b[0] != 'd' {
			t.Fatalf("seed %d: the clone shares data with the original", seed)
		}
	}
	if lost == 0 || kept == 0 || torn == 0 || renamedOld == 0 || renamedNew == 0 {
		t.Fatalf("200 seeds never showed every outcome: unsynced write lost %d, kept %d, torn %d; rename lost %d, kept %d",
			lost, kept, torn, renamedOld, renamedNew)
	}
}

// TestMemFSLinks: hard links share data and count names; an unlinked file
// stays readable through an open handle.
func TestMemFSLinks(t *testing.T) {
	m := NewCrashableMem()
	for _, d := range []string{"/a", "/b"} {
		if err := m.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, m, "/a/f", []byte("x"), true)
	if err := m.Link("/a/f", "/b/g"); err != nil {
		t.Fatal(err)
	}
	if err := m.Link("/a/f", "/b/g"); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second link: %v", err)
	}
	fi, err := m.Stat("/b/g")
	if err != nil || LinkCount(fi) != 2 {
		t.Fatalf("link count: %v %v", fi, err)
	}
	write(t, m, "/a/other", []byte("x"), true)
	orig, _ := m.Stat("/a/f")
	other, _ := m.Stat("/a/other")
	if !SameFile(fi, orig) || SameFile(fi, other) {
		t.Fatalf("SameFile: of a link %v, of another file with the same bytes %v", SameFile(fi, orig), SameFile(fi, other))
	}
	f, err := m.Open("/a/f")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/f", "/b/g"} {
		if err := m.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 0); err != nil || b[0] != 'x' {
		t.Fatalf("read after unlink: %q %v", b, err)
	}
	if _, err := m.Stat("/a/f"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat removed: %v", err)
	}
}

// TestCrashCloneDirs: a directory's rename and its removal (RemoveAll)
// are names in its parent: durable only once the parent is synced, before
// that kept or lost by a crash, and a rename never leaves both names or a
// directory that is half at each. A synced directory keeps its files
// wherever its name survives.
func TestCrashCloneDirs(t *testing.T) {
	var renameLost, renameKept, removeLost, removeKept, removePartial int
	for seed := range uint64(200) {
		m := NewCrashableMem()
		for _, d := range []string{"/s/a.tmp/data", "/s/old"} {
			if err := MkdirAllSync(m, d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		write(t, m, "/s/a.tmp/meta", []byte("meta"), true)
		write(t, m, "/s/a.tmp/data/seg", []byte("seg"), true)
		write(t, m, "/s/old/x", []byte("x"), true)
		write(t, m, "/s/old/y", []byte("y"), true)
		for _, d := range []string{"/s/a.tmp/data", "/s/a.tmp", "/s/old", "/s"} {
			if err := SyncDir(m, d); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Rename("/s/a.tmp", "/s/a"); err != nil {
			t.Fatal(err)
		}
		if err := m.RemoveAll("/s/old"); err != nil {
			t.Fatal(err)
		}
		if dirs, err := m.Subdirs("/s"); err != nil || !slices.Equal(dirs, []string{"a"}) {
			t.Fatalf("Subdirs after rename and RemoveAll: %v %v", dirs, err)
		}
		c := m.CrashClone(rand.New(rand.NewPCG(seed, 2)))
		dirs, err := c.Subdirs("/s")
		if err != nil {
			t.Fatal(err)
		}
		hasA, hasTmp := slices.Contains(dirs, "a"), slices.Contains(dirs, "a.tmp")
		switch {
		case hasA == hasTmp:
			t.Fatalf("seed %d: rename not atomic: %v", seed, dirs)
		case hasA:
			renameKept++
		default:
			renameLost++
		}
		snap := "/s/a"
		if hasTmp {
			snap = "/s/a.tmp"
		}
		for name, want := range map[string]string{"meta": "meta", "data/seg": "seg"} {
			if b, err := ReadFile(c, snap+"/"+name); err != nil || string(b) != want {
				t.Fatalf("seed %d: %s/%s: %q %v", seed, snap, name, b, err)
			}
		}
		if !slices.Contains(dirs, "old") {
			removeKept++
			continue
		}
		left, err := c.ReadDir("/s/old")
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 2 {
			removeLost++
		} else {
			removePartial++
		}
	}
	if renameLost == 0 || renameKept == 0 || removeLost == 0 || removeKept == 0 || removePartial == 0 {
		t.Fatalf("200 seeds never showed every outcome: rename lost %d, kept %d; RemoveAll lost %d, kept %d, partial %d",
			renameLost, renameKept, removeLost, removeKept, removePartial)
	}

	// Synced, both are durable.
	m := NewCrashableMem()
	if err := MkdirAllSync(m, "/s/a.tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.MkdirAll("/s/old", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/s/a.tmp", "/s/a"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveAll("/s/old"); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(m, "/s"); err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(20) {
		dirs, err := m.CrashClone(rand.New(rand.NewPCG(seed, 3))).Subdirs("/s")
		if err != nil || !slices.Equal(dirs, []string{"a"}) {
			t.Fatalf("seed %d: after the parent's sync: %v %v", seed, dirs, err)
		}
	}
}

// TestMemFSDirs: Subdirs and ReadDir split a directory's names; a
// directory rename carries its files and refuses a non-empty target;
// Remove refuses a non-empty directory; RemoveAll of a missing name is no
// error; a directory made again after an unsynced removal may be lost
// with it.
func TestMemFSDirs(t *testing.T) {
	m := NewCrashableMem()
	if err := MkdirAllSync(m, "/d/sub/deeper", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.MkdirAll("/d/other", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/d/f", nil, true)
	write(t, m, "/d/sub/g", []byte("g"), true)
	if dirs, _ := m.Subdirs("/d"); !slices.Equal(dirs, []string{"other", "sub"}) {
		t.Fatalf("Subdirs: %v", dirs)
	}
	if files, _ := m.ReadDir("/d"); !slices.Equal(files, []string{"f"}) {
		t.Fatalf("ReadDir: %v", files)
	}
	if err := m.Remove("/d/sub"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("Remove of a non-empty dir: %v", err)
	}
	write(t, m, "/d/other/h", nil, true)
	if err := m.Rename("/d/sub", "/d/other"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rename onto a non-empty dir: %v", err)
	}
	if err := m.Rename("/d/sub", "/d/f"); err == nil {
		t.Fatal("rename of a dir onto a file")
	}
	if err := m.Rename("/d/sub", "/d/moved"); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(m, "/d/moved/g"); err != nil || string(b) != "g" {
		t.Fatalf("file of a renamed dir: %q %v", b, err)
	}
	if _, err := m.Stat("/d/sub/g"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old path after a dir rename: %v", err)
	}
	if _, err := m.Stat("/d/moved/deeper"); err != nil {
		t.Fatalf("subdirectory of a renamed dir: %v", err)
	}
	if err := m.RemoveAll("/d/missing"); err != nil {
		t.Fatalf("RemoveAll of a missing name: %v", err)
	}
	if err := SyncDir(m, "/d"); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveAll("/d/moved"); err != nil {
		t.Fatal(err)
	}
	if err := m.MkdirAll("/d/moved", 0o755); err != nil {
		t.Fatal(err)
	}
	var again, old int
	for seed := range uint64(100) {
		c := m.CrashClone(rand.New(rand.NewPCG(seed, 4)))
		if _, err := c.Stat("/d/moved/g"); err == nil {
			old++ // the removal was lost: the old directory is back
		} else if _, err := c.Stat("/d/moved"); err == nil {
			again++
		}
	}
	if again == 0 || old == 0 {
		t.Fatalf("100 seeds: the new directory %d times, the old one %d times", again, old)
	}
}

// TestDurableClone: the image with no pending operation kept holds what
// was fsynced and nothing else, every time.
func TestDurableClone(t *testing.T) {
	m := NewCrashableMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(m, "/"); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/d/a", []byte("synced"), true)
	if err := SyncDir(m, "/d"); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenFile("/d/a", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(" not synced"), 6); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/d/b", []byte("synced data, unsynced name"), true)
	for range 3 {
		c := m.DurableClone()
		if b, err := ReadFile(c, "/d/a"); err != nil || string(b) != "synced" {
			t.Fatalf("/d/a in the durable image: %q %v", b, err)
		}
		if _, err := c.Stat("/d/b"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("/d/b, whose name was never synced, in the durable image: %v", err)
		}
	}
}

// TestCrashCloneNewDirs: a directory MkdirAll makes is a name pending in
// its parent: a crash before the parent's sync may drop it with every
// file below it (synced or not), and the durable image always does;
// MkdirAllSync makes the whole path durable, also for a directory an
// earlier (crashed) call made without the sync.
func TestCrashCloneNewDirs(t *testing.T) {
	mk := func(mkdir func(m *MemFS, dir string) error) *MemFS {
		m := NewCrashableMem()
		if err := mkdir(m, "/a/b"); err != nil {
			t.Fatal(err)
		}
		write(t, m, "/a/b/f", []byte("f"), true)
		if err := SyncDir(m, "/a/b"); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := mk(func(m *MemFS, dir string) error { return m.MkdirAll(dir, 0o755) })
	var lost, kept int
	for seed := range uint64(100) {
		c := m.CrashClone(rand.New(rand.NewPCG(seed, 5)))
		if b, err := ReadFile(c, "/a/b/f"); err == nil && string(b) == "f" {
			kept++
		} else if _, err := c.Stat("/a/b"); err == nil {
			t.Fatalf("seed %d: /a/b survived without its synced file", seed)
		} else {
			lost++
		}
	}
	if lost == 0 || kept == 0 {
		t.Fatalf("100 seeds: a new unsynced directory lost %d times, kept %d times", lost, kept)
	}
	if _, err := m.DurableClone().Stat("/a"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the durable image holds /a, whose parent was never synced: %v", err)
	}
	// The parent synced, the grandparent not: /a survives, /a/b not.
	if err := SyncDir(m, "/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DurableClone().Stat("/a"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("/a in the durable image before / was synced: %v", err)
	}

	for name, mkdir := range map[string]func(m *MemFS, dir string) error{
		"MkdirAllSync": func(m *MemFS, dir string) error { return MkdirAllSync(m, dir, 0o755) },
		"MkdirAllSync after MkdirAll": func(m *MemFS, dir string) error {
			if err := m.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return MkdirAllSync(m, dir, 0o755)
		},
	} {
		c := mk(mkdir).DurableClone()
		if b, err := ReadFile(c, "/a/b/f"); err != nil || string(b) != "f" {
			t.Fatalf("%s: /a/b/f in the durable image: %q %v", name, b, err)
		}
	}
}

// denyOpen is a filesystem where one directory cannot be opened (as a
// directory of mode 0711 for another user).
type denyOpen struct {
	*MemFS
	dir string
}

func (d denyOpen) Open(name string) (File, error) {
	if name == d.dir {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrPermission}
	}
	return d.MemFS.Open(name)
}

// TestMkdirAllSyncUnreadableAncestor: an ancestor that cannot be opened
// is skipped when the call made nothing in it (the directories below are
// still synced), and is an error when it did.
func TestMkdirAllSyncUnreadableAncestor(t *testing.T) {
	m := NewCrashableMem()
	if err := MkdirAllSync(m, "/home/u", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllSync(denyOpen{m, "/home"}, "/home/u/data", 0o755); err != nil {
		t.Fatalf("with an unreadable ancestor: %v", err)
	}
	if _, err := m.DurableClone().Stat("/home/u/data"); err != nil {
		t.Fatalf("/home/u/data not durable: %v", err)
	}
	if err := MkdirAllSync(denyOpen{m, "/home"}, "/home/v/data", 0o755); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("making a directory in an unreadable one: %v, want a permission error", err)
	}
}
