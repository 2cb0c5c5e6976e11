// Package testwait is the one way tests wait for a condition that real I/O
// (sockets, processes, Raft elections) makes true at an unknown time: poll
// it until it holds, failing the test after a deadline. Code driven only by
// timers is tested with testing/synctest instead, without waiting at all.
//
//	testwait.For(t, testwait.Max, "a leader", func() bool { return n.IsLeader() })
//	testwait.ForErr(t, time.Minute, "every shard at lsn 9", func() error { ... })
//
// The pause between two checks starts at MinPoll and doubles up to
// MaxPoll: a condition that holds soon is seen soon, and one that takes
// seconds (and may cost an RPC per check) is not polled in a busy loop.
//
// Goroutines: none; every function runs on the caller's.
package testwait

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Max is the usual deadline: generous, because tests share two cores with
// the whole team; a test that needs longer (a cluster catching up under
// load) passes its own.
const Max = 30 * time.Second

// The pause between checks: MinPoll first, doubling up to MaxPoll.
const (
	MinPoll = time.Millisecond
	MaxPoll = 20 * time.Millisecond
)

// For polls cond until it returns true, failing t (t.Fatal, so from the
// test's goroutine only) if it still does not after d. what names the
// condition in the failure message.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Until(d, what, cond); err != nil {
		t.Fatal(err)
	}
}

// ForErr is For for a condition that says why it does not hold yet: cond
// returns nil when it holds, and the last error is in the failure message.
func ForErr(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	if err := UntilErr(d, what, cond); err != nil {
		t.Fatal(err)
	}
}

// Until is For for code without a testing.TB (benchmark harnesses): it
// returns an error wrapping ErrTimeout instead of failing a test.
func Until(d time.Duration, what string, cond func() bool) error {
	return UntilErr(d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilErr is ForErr returning its failure (wrapping ErrTimeout).
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
