package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dieWithParent makes the kernel send cmd's process SIGTERM when this
// process ends (Pdeathsig; strictly: when the thread that started it
// ends, which for a Go program without locked threads is the process's
// end). The child's SIGTERM handler closes its servers and removes its
// temporary directory.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// userHZ is the unit of /proc/<pid>/stat's times: USER_HZ, which Linux
// fixes at 100 for user space on every architecture Go supports
// (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// procCPU returns the CPU time (utime + stime, every thread) process pid
// has used, from /proc/<pid>/stat, in steps of 1/userHZ s.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line (proc(5)). The command name, field 2, is in
// parentheses and may hold spaces and parentheses itself: the fields are
// counted from the last ')'.
func parseProcStat(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat: no command name in %q", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bench: /proc stat: bad time %q", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
