//go:build !linux

package e2e

import "syscall"

// childAttr: only Linux can tie a child's life to the test process; elsewhere
// t.Cleanup alone kills the children.
func childAttr() *syscall.SysProcAttr { return nil }
