//go:build nemesis

package main

import (
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// clockFileEnv names the file a nemesis test writes a clock offset to (a
// time.Duration such as "2h" or "-30m"; empty or absent: 0). Only a binary
// built with the nemesis tag (the e2e nemesis test builds its own) reads it.
const clockFileEnv = "LOGPLAYER_NEMESIS_CLOCK_FILE"

// clockPoll is how often the offset file is read.
const clockPoll = 50 * time.Millisecond

// storeClock returns the store's clock shifted by the offset in the file
// named by LOGPLAYER_NEMESIS_CLOCK_FILE, read every clockPoll by one
// goroutine for the life of the process; nil (the real clock) when the
// variable is unset.
func storeClock() func() time.Time {
	path := os.Getenv(clockFileEnv)
	if path == "" {
		return nil
	}
	var offset atomic.Int64
	read := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			offset.Store(0)
			return
		}
		if d, err := time.ParseDuration(s); err == nil {
			offset.Store(int64(d))
		}
	}
	read()
	go func() {
		for range time.Tick(clockPoll) {
			read()
		}
	}()
	return func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
}
