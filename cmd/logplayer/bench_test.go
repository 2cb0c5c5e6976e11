package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBenchStoreServerProcesses runs `bench store` from the built binary:
// above 1 client its LogStore cluster and no-op server run in server
// processes (the binary started again, ServeChild in the command's Run),
// the server CPU table says so, and nothing is left in the temporary
// directory.
func TestBenchStoreServerProcesses(t *testing.T) {
	bin := binary(t)
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "store", "--clients", "2", "--systems", "logstore-wal,logstore-wal-conns,grpc-conns",
		"--duration", "300ms", "--warmup", "100ms")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if !strings.Contains(out.String(), "| server processes |") {
		t.Errorf("no server CPU of server processes in:\n%s", out.String())
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
}
