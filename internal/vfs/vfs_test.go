package vfs

import (
	"errors"
	"os"
	"testing"
)

// TestWriteFileSync: the data is fsynced (it survives in the durable image
// once the name is synced too) and replaces what the file held; an error
// of beforeSync stops before the fsync and is returned; the file is closed
// either way.
func TestWriteFileSync(t *testing.T) {
	mem := NewCrashableMem()
	m := &countingFS{MemFS: mem}
	if err := MkdirAllSync(m, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileSync(m, "/d/f", []byte("a longer first content"), nil); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if err := WriteFileSync(m, "/d/f", []byte("second"), func() error { calls++; return nil }); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("beforeSync ran %d times, want 1", calls)
	}
	if err := SyncDir(m, "/d"); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(mem.DurableClone(), "/d/f"); err != nil || string(b) != "second" {
		t.Fatalf("durable /d/f: %q %v, want \"second\"", b, err)
	}

	injected := errors.New("injected")
	if err := WriteFileSync(m, "/d/g", []byte("never synced"), func() error { return injected }); !errors.Is(err, injected) {
		t.Fatalf("WriteFileSync with a failing beforeSync: %v, want %v", err, injected)
	}
	if err := SyncDir(m, "/d"); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(mem.DurableClone(), "/d/g"); err != nil || len(b) != 0 {
		t.Fatalf("durable /d/g after a failed fsync point: %q %v, want the name with no data", b, err)
	}
	if err := WriteFileSync(m, "/d/g", []byte("now"), nil); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(mem.DurableClone(), "/d/g"); err != nil || string(b) != "now" {
		t.Fatalf("durable /d/g: %q %v, want \"now\"", b, err)
	}

	if err := WriteFileSync(m, "/missing/f", nil, nil); err == nil {
		t.Fatal("WriteFileSync into a missing directory: nil error")
	}
	if m.open != 0 {
		t.Fatalf("%d files left open", m.open)
	}
}

// countingFS counts the files opened and not yet closed.
type countingFS struct {
	*MemFS
	open int
}

type countedFile struct {
	File
	fs *countingFS
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := c.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	c.open++
	return countedFile{f, c}, nil
}

func (c *countingFS) Open(name string) (File, error) { return c.OpenFile(name, os.O_RDONLY, 0) }

func (f countedFile) Close() error {
	f.fs.open--
	return f.File.Close()
}
