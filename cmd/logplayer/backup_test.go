package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/internal/cli"
)

// backup save against a running cluster writes a file that backup restore
// accepts; a truncated copy is refused with the reason and writes nothing.
func TestBackupSaveRestoreCLI(t *testing.T) {
	d := startTestDev(t)
	addr := "--addr=" + strings.Join(d.StoreAddrs, ",")
	if code, _, errOut := runCLI(t, nil, "append", addr, "--topic", `orders={"id":1}`); code != cli.ExitOK {
		t.Fatalf("append: exit %d, %q", code, errOut)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "b.lpb")
	code, out, errOut := runCLI(t, nil, "backup", "save", addr, "--file", file)
	if code != cli.ExitOK || !strings.Contains(out, "backup "+file) {
		t.Fatalf("backup save: exit %d, %q %q", code, out, errOut)
	}
	peer := "--peer=n1=127.0.0.1:1/127.0.0.1:2"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.lpb")
	if err := os.WriteFile(bad, b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, nil, "backup", "restore", "--file", bad, "--data-dir", filepath.Join(dir, "x"), peer)
	if code == cli.ExitOK || !strings.Contains(errOut, "bad backup file") || !strings.Contains(errOut, "truncated") {
		t.Fatalf("restore of a truncated file: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Fatalf("refused restore wrote its data dir (%v)", err)
	}
	code, out, errOut = runCLI(t, nil, "backup", "restore", "--file", file, "--data-dir", filepath.Join(dir, "n1"), peer)
	if code != cli.ExitOK || !strings.Contains(out, "restored") {
		t.Fatalf("backup restore: exit %d, %q %q", code, out, errOut)
	}
}
