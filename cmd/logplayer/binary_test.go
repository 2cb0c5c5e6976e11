package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests in this file run the built binary, as a user does.

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	// The CLI reads LOGPLAYER_ variables from the process environment: the
	// tests set their own (t.Setenv), none leak in from the caller's shell.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, app.EnvPrefix+"_") {
			os.Unsetenv(name)
		}
	}
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// binary builds the logplayer binary once (without -race: it is the
// product, not the test).
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "logplayer-bin-"); build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "logplayer")
		out, err := exec.Command("go", "build", "-o", build.path, ".").CombinedOutput()
		if err != nil {
			build.err = errors.New(string(out))
		}
	})
	if build.err != nil {
		t.Fatalf("build: %v", build.err)
	}
	return build.path
}

// exitCode runs the binary and returns its exit code, stdout and stderr.
func exitCode(t *testing.T, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	bin := binary(t) // built first: the build is not the command's time
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), out.String(), errb.String()
	default:
		t.Fatalf("%v: %v (stderr %q)", args, err, errb.String())
		return 0, "", ""
	}
}

func TestBinaryExitCodes(t *testing.T) {
	if code, out, _ := exitCode(t, time.Minute, "version"); code != 0 || !strings.HasPrefix(out, "logplayer ") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	code, _, errOut := exitCode(t, time.Minute, "append", "--bogus")
	wantUsage(t, code, errOut, "flag provided but not defined: --bogus")
	code, _, errOut = exitCode(t, time.Minute, "append", "--topic", `orders={"id":`)
	wantUsage(t, code, errOut, "malformed JSON")
	code, _, errOut = exitCode(t, time.Minute, "status", "--addr", closedAddr(t), "--timeout", "1s")
	wantRuntimeError(t, code, errOut, "cannot reach the LogStore")
}

func TestDevDemoBinary(t *testing.T) {
	code, out, errOut := exitCode(t, 4*time.Minute, "dev", "--demo", "10s", "--port-base", "0")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	var r struct {
		Committed       int     `json:"committed"`
		Delivered       int     `json:"delivered"`
		Duplicates      int     `json:"duplicates"`
		Missing         int     `json:"missing"`
		StateMismatches int     `json:"state_mismatches"`
		OK              bool    `json:"ok"`
		CommitP50Ms     float64 `json:"commit_p50_ms"`
		ApplyP99Ms      float64 `json:"apply_p99_ms"`
	}
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		t.Fatalf("last stdout line is not JSON: %q (%v); stderr:\n%s", last, err, errOut)
	}
	if code != 0 || !r.OK || r.Committed == 0 || r.Delivered == 0 || r.Duplicates != 0 || r.Missing != 0 || r.StateMismatches != 0 {
		t.Fatalf("exit %d, result %+v\nstdout:\n%s\nstderr:\n%s", code, r, out, errOut)
	}
	if r.CommitP50Ms <= 0 || r.ApplyP99Ms <= 0 {
		t.Fatalf("latencies not measured: %+v", r)
	}
	if !strings.Contains(errOut, "tx/s") || !strings.Contains(errOut, "lag") {
		t.Fatalf("no progress line on stderr:\n%s", errOut)
	}
}

func TestDevServesUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "dev", "--port-base", "0")
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var banner []string
	for sc.Scan() {
		banner = append(banner, sc.Text())
		if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
			break
		}
	}
	if len(banner) == 0 || !strings.HasPrefix(banner[len(banner)-1], "Press Ctrl-C") {
		t.Fatalf("no banner; stdout %q, stderr:\n%s", banner, errb.String())
	}
	if !strings.Contains(strings.Join(banner, "\n"), "127.0.0.1:") {
		t.Fatalf("banner without addresses: %q", banner)
	}
	devHTTPWorks(t, banner)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGINT: %v (stderr:\n%s)", err, errb.String())
	}
	if !strings.Contains(errb.String(), "shutting down") {
		t.Fatalf("stderr:\n%s", errb.String())
	}
}
