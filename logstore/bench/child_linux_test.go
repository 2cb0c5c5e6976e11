package bench

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/poll"
)

// TestParseProcStat reads utime + stime from /proc/<pid>/stat lines,
// counting fields from the command name's last ')'.
func TestParseProcStat(t *testing.T) {
	const tail = " S 1 1234 1234 0 -1 4194560 5018 0 0 0 %s %s 0 0 20 0 9 0 12345 1097728000 4567 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0"
	for _, tc := range []struct {
		comm, utime, stime string
		want               time.Duration
	}{
		{"logplayer", "250", "75", 3250 * time.Millisecond},
		{"a b) c (d", "1", "0", 10 * time.Millisecond}, // spaces and parentheses in the name
		{"x", "0", "0", 0},
	} {
		line := "4321 (" + tc.comm + ")" + strings.Replace(strings.Replace(tail, "%s", tc.utime, 1), "%s", tc.stime, 1) + "\n"
		got, err := parseProcStat(line)
		if err != nil || got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.comm, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"",
		"4321 logplayer S 1", // no parentheses
		"4321 (logplayer) S 1 1234 1234 0 -1 4194560 5018 0", // too short
		"4321 (logplayer)" + strings.Replace(strings.Replace(tail, "%s", "x", 1), "%s", "1", 1),
		"4321 (logplayer)" + strings.Replace(strings.Replace(tail, "%s", "1", 1), "%s", "-2", 1),
	} {
		if d, err := parseProcStat(bad); err == nil {
			t.Errorf("%q: %v, want an error", bad, d)
		}
	}
}

// TestProcCPUMatchesRusage: this process's CPU time read from /proc agrees
// with getrusage's within the ticks /proc counts in (so the fields and
// the unit are right).
func TestProcCPUMatchesRusage(t *testing.T) {
	x := 0
	for processCPU() < 300*time.Millisecond { // burn CPU until there is some to compare
		for i := range 1_000_000 {
			x += i
		}
	}
	_ = x
	before := processCPU()
	got, err := procCPU(os.Getpid())
	after := processCPU()
	if err != nil {
		t.Fatal(err)
	}
	const tick = time.Second / userHZ
	if got < before-2*tick || got > after+tick {
		t.Errorf("/proc says %v, getrusage %v to %v", got, before, after)
	}
}

// TestServerChildDiesWithParent: when the process that started a server
// child is killed (no chance to stop it), the child gets SIGTERM
// (Pdeathsig), exits and removes its temporary directory.
func TestServerChildDiesWithParent(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spawnerEnv+"=1", "TMPDIR="+tmp)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the spawner's line %q: %v %v", line, err, perr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 1 {
		t.Errorf("the child's data directory: %v, want one", left)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := poll.Until(childStopMax, "the server child's exit", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		i := strings.LastIndexByte(string(b), ')')
		return i >= 0 && strings.HasPrefix(string(b[i+1:]), " Z") // exited, not reaped yet
	}); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
}
