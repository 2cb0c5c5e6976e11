package e2e

import "syscall"

// childAttr makes the kernel SIGKILL a child when the test process dies
// (a test timeout's panic skips t.Cleanup), so no node outlives the test.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
