//go:build !nemesis

package main

import "time"

// storeClock is the store's clock (logstore.Config.Now): nil, the real
// clock, unless the binary is built with the nemesis tag (testclock_nemesis.go).
func storeClock() func() time.Time { return nil }
