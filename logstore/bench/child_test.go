package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/logstore"
)

// TestMain lets the test binary serve as a server child (ServerChildEnv)
// or as a process that starts one and waits (spawnerEnv, for the test of
// Pdeathsig), like `logplayer bench store` does for a run.
func TestMain(m *testing.M) {
	if served, err := ServeChild(context.Background(), os.Stdin, os.Stdout); served {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(spawnerEnv) != "" {
		os.Exit(spawn())
	}
	os.Exit(m.Run())
}

// testServerCommand runs this test binary as a server child.
func testServerCommand() []string { return []string{os.Args[0], "-test.run=^$"} }

// TestRunServerProcesses runs the rows of issue #26's CPU goal with their
// servers in child processes, end to end: every row completes
// transactions; above 1 client its server CPU is the child's (positive,
// below the row's whole CPU), the LogStore rows still read the leader's
// figures from the child and --row-profiles gets the children's profiles;
// the serial level and bare raft run in this process; the children's
// temporary directories are gone after the run.
func TestRunServerProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the run's and the children's temporary directories
	profiles := t.TempDir()
	systems := []System{LogStoreWAL, LogStoreWALConns, LogStoreWALHTTP, RaftWAL, GRPCConns}
	table, out := runRows(ctx, t, Config{Clients: []int{1, 4}, Systems: systems, Duration: 500 * time.Millisecond, Warmup: 200 * time.Millisecond,
		ServerCommand: testServerCommand(), RowProfileDir: profiles}, 2*len(systems))
	for _, r := range table.Rows {
		if r.Txns == 0 || r.Errors != 0 || r.CPUPerTxn <= 0 {
			t.Errorf("bad row %+v", r)
		}
		if want := !r.System.bare() && r.Clients > 1; r.ServerProcess != want {
			t.Errorf("row %s × %d: server process %v, want %v", r.System, r.Clients, r.ServerProcess, want)
		}
		if !r.ServerProcess {
			if fi, err := os.Stat(filepath.Join(profiles, fmt.Sprintf("%d-%s.pprof", r.Clients, r.System))); err != nil || fi.Size() == 0 {
				t.Errorf("row %s × %d: in-process profile: %v", r.System, r.Clients, err)
			}
			continue
		}
		if r.ServerCPUPerTxn <= 0 {
			t.Errorf("row %s: no server CPU", r.System)
		}
		if r.ServerCPUPerTxn >= r.CPUPerTxn {
			t.Errorf("row %s: server CPU %v not below the row's %v (clients and servers)", r.System, r.ServerCPUPerTxn, r.CPUPerTxn)
		}
		if r.System.logstore() && (r.TxnsPerEntry < 1 || r.TxnsPerCall < 1 || r.RaftCommit <= 0) {
			t.Errorf("row %s: leader figures %+v", r.System, r)
		}
		if fi, err := os.Stat(filepath.Join(profiles, fmt.Sprintf("4-%s-server.pprof", r.System))); err != nil || fi.Size() == 0 {
			t.Errorf("row %s: server profile: %v", r.System, err)
		}
	}
	if !strings.Contains(out, "| met | server processes |") && !strings.Contains(out, "| missed | server processes |") {
		t.Errorf("the server CPU table does not say its method:\n%s", out)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
}

// TestServerChildStopsAndCleans: a server child stops when its stdin ends
// and when it gets SIGTERM (what Pdeathsig sends), each time removing its
// temporary directory; a child that cannot start is an error, not a hang.
func TestServerChildStopsAndCleans(t *testing.T) {
	for _, how := range []string{"stdin", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			c, err := startServerChild(testServerCommand(), childSpec{Role: roleLogStore, Backend: logstore.RaftLogWAL}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 1 {
				t.Fatalf("the child's data directory: %v, want one", left)
			}
			if st, err := c.stats(); err != nil || st.Leader < 0 {
				t.Fatalf("stats %+v, %v: want a leader", st, err)
			}
			if how == "sigterm" {
				if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				select {
				case <-c.done:
				case <-time.After(childStopMax):
					t.Fatal("the child did not exit after SIGTERM")
				}
			}
			c.stop()
			if code := c.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit code %d", code)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left in the temporary directory: %v", left)
			}
		})
	}
	if _, err := startServerChild(testServerCommand(), childSpec{Role: "nope"}, os.Stderr); err == nil {
		t.Error("a child of an unknown role started")
	}
}

// spawnerEnv makes the test binary a spawner: it starts a LogStore server
// child, prints the child's pid and waits for its stdin to end
// (TestServerChildDiesWithParent kills it first).
const spawnerEnv = "LOGPLAYER_BENCH_TEST_SPAWNER"

func spawn() int {
	c, err := startServerChild(testServerCommand(), childSpec{Role: roleLogStore, Backend: logstore.RaftLogWAL}, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(c.cmd.Process.Pid)
	_, _ = io.Copy(io.Discard, os.Stdin)
	c.stop()
	return 0
}
