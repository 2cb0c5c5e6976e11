// Package poll waits for a condition that real I/O (sockets, processes,
// Raft elections) makes true at an unknown time: it checks the condition
// until it holds or a deadline passes. Tests use it through package
// internal/testwait (which fails the test); benchmark harnesses call it
// directly. It imports no "testing", so the shipped binary may link it.
//
// The pause between two checks starts at MinPoll and doubles up to
// MaxPoll: a condition that holds soon is seen soon, and one that takes
// seconds (and may cost an RPC per check) is not polled in a busy loop.
//
// Goroutines: none; every function runs on the caller's.
package poll

import (
	"errors"
	"fmt"
	"time"
)

// The pause between checks: MinPoll first, doubling up to MaxPoll.
const (
	MinPoll = time.Millisecond
	MaxPoll = 20 * time.Millisecond
)

// Until checks cond until it returns true and returns nil, or returns an
// error wrapping ErrTimeout, naming what, once d has passed.
func Until(d time.Duration, what string, cond func() bool) error {
	return UntilErr(d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilErr is Until for a condition that says why it does not hold yet:
// cond returns nil when it holds, and the last error is in the timeout
// error.
func UntilErr(d time.Duration, what string, cond func() error) error {
	end := time.Now().Add(d)
	pause := MinPoll
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(end) {
			if err == errNotYet {
				return fmt.Errorf("%w after %v waiting for %s", ErrTimeout, d, what)
			}
			return fmt.Errorf("%w after %v waiting for %s: %v", ErrTimeout, d, what, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, MaxPoll)
	}
}

// ErrTimeout is what Until and UntilErr return when the deadline passed.
var ErrTimeout = errors.New("timed out")

// errNotYet is For's reason: its condition gives none.
var errNotYet = errors.New("condition false")
