//go:build !linux

package bench

import (
	"errors"
	"os/exec"
	"time"
)

// dieWithParent has no Pdeathsig here: the child stops when its stdin
// ends, which the benchmark's exit closes.
func dieWithParent(*exec.Cmd) {}

// procCPU is Linux-only (/proc): without it a server process's row has no
// server CPU.
func procCPU(int) (time.Duration, error) {
	return 0, errors.New("bench: a child's CPU time is read from /proc (Linux only)")
}
