// Package testwait is the one way tests wait for a condition that real I/O
// (sockets, processes, Raft elections) makes true at an unknown time: poll
// it until it holds, failing the test after a deadline. Code driven only by
// timers is tested with testing/synctest instead, without waiting at all.
//
//	testwait.For(t, testwait.Max, "a leader", func() bool { return n.IsLeader() })
//	testwait.ForErr(t, time.Minute, "every shard at lsn 9", func() error { ... })
//
// The polling itself is package internal/poll (poll.UntilErr), which
// code that is not a test (benchmark harnesses) uses directly, so the
// shipped binary links no "testing".
//
// Goroutines: none; every function runs on the caller's.
package testwait

import (
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/poll"
)

// Max is the usual deadline: generous, because tests share two cores with
// the whole team; a test that needs longer (a cluster catching up under
// load) passes its own.
const Max = 30 * time.Second

// For polls cond until it returns true, failing t (t.Fatal, so from the
// test's goroutine only) if it still does not after d. what names the
// condition in the failure message.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := poll.Until(d, what, cond); err != nil {
		t.Fatal(err)
	}
}

// ForErr is For for a condition that says why it does not hold yet: cond
// returns nil when it holds, and the last error is in the failure message.
func ForErr(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	if err := poll.UntilErr(d, what, cond); err != nil {
		t.Fatal(err)
	}
}
