// Package python runs the Python SDK's conformance tests (sdk/python/tests)
// from go test, so CI runs them: against a real `logplayer dev` cluster
// built from this tree, with TLS on. They need Debian's python3-grpcio and
// python3-protobuf for /usr/bin/python3 (and protobuf-compiler-grpc for
// the stubs' freshness check); .ci/run installs them. When they are
// missing the tests FAIL saying so: they never skip.
package python

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// python is the interpreter the SDK targets: the distribution's, which
// sees python3-grpcio and python3-protobuf (a pyenv python3 first on PATH
// does not).
const python = "/usr/bin/python3"

const install = "apt-get install -y python3-grpcio python3-protobuf protobuf-compiler-grpc"

// requirePython fails the test unless /usr/bin/python3 imports grpc and
// google.protobuf.
func requirePython(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput()
	if err != nil {
		t.Fatalf("the Python SDK's tests need %s with python3-grpcio and python3-protobuf (%s): %v\n%s",
			python, install, err, out)
	}
}

// TestPythonConformance builds the logplayer binary and runs the Python
// unittest suite (sdk/python/tests) with it.
func TestPythonConformance(t *testing.T) {
	requirePython(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "logplayer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/logplayer")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", "tests")
	cmd.Env = append(os.Environ(), "LOGPLAYER_BIN="+bin, "TMPDIR="+tmp, "LOGPLAYER_KEEP=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		logTails(t, tmp)
		t.Fatalf("the Python SDK's conformance tests failed: %v", err)
	}
	if !bytes.Contains(out, []byte("\nOK")) {
		t.Fatalf("unittest did not report OK")
	}
}

// logTails prints the end of every process log the Python tests left
// (dev, player, target) to explain a failure.
func logTails(t *testing.T, dir string) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return nil
		}
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("--- %s (last 40 lines)\n%s", path, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		return nil
	})
}

// TestPythonStubsFresh regenerates the Python stubs from proto/*.proto
// (gen.sh) and compares them with the committed ones.
func TestPythonStubsFresh(t *testing.T) {
	if _, err := exec.LookPath("grpc_python_plugin"); err != nil {
		t.Fatalf("the stubs' freshness check needs grpc_python_plugin (%s): %v", install, err)
	}
	out := t.TempDir()
	gen := exec.Command("sh", "gen.sh")
	gen.Env = append(os.Environ(), "OUT="+out)
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, b)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.py"))
	if len(files) == 0 {
		t.Fatal("gen.sh wrote no stubs")
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join("logplayer", "_pb", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("logplayer/_pb/%s is stale: run sdk/python/gen.sh and commit (%v)", filepath.Base(f), err)
		}
	}
}
