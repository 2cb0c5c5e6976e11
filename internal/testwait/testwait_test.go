package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/logplayer/logplayer/internal/poll"
)

// fatalT records the failure of a For on a goroutine of its own.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls wait with a fatalT on a new goroutine and returns the failure
// message ("" if it returned normally).
func run(t *testing.T, wait func(testing.TB)) string {
	f := &fatalT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(f)
	}()
	<-done
	return f.msg
}

// A condition that comes true is waited for, with pauses doubling from
// MinPoll to MaxPoll.
func TestForWaitsUntilTrue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var checks []time.Duration
		start := time.Now()
		msg := run(t, func(tb testing.TB) {
			For(tb, time.Second, "ten checks", func() bool {
				checks = append(checks, time.Since(start))
				return len(checks) == 10
			})
		})
		if msg != "" {
			t.Fatalf("failed: %s", msg)
		}
		ms := time.Millisecond
		want := []time.Duration{0, ms, 3 * ms, 7 * ms, 15 * ms, 31 * ms, 51 * ms, 71 * ms, 91 * ms, 111 * ms}
		if fmt.Sprint(checks) != fmt.Sprint(want) {
			t.Fatalf("checks at %v, want %v", checks, want)
		}
	})
}

// A condition that never holds fails the test after the deadline, naming
// it, and ForErr quotes the condition's last reason.
func TestForTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		msg := run(t, func(tb testing.TB) { For(tb, 5*time.Second, "the impossible", func() bool { return false }) })
		if took := time.Since(start); took < 5*time.Second || took > 5*time.Second+poll.MaxPoll {
			t.Fatalf("gave up after %v, want 5s", took)
		}
		if msg != "timed out after 5s waiting for the impossible" {
			t.Fatalf("message %q", msg)
		}
		n := 0
		msg = run(t, func(tb testing.TB) {
			ForErr(tb, time.Second, "lsn 9", func() error { n++; return fmt.Errorf("at lsn %d", n) })
		})
		if !strings.HasPrefix(msg, "timed out after 1s waiting for lsn 9: at lsn ") || !strings.HasSuffix(msg, fmt.Sprint(n)) {
			t.Fatalf("message %q, want the last reason (check %d)", msg, n)
		}
		if msg := run(t, func(tb testing.TB) { ForErr(tb, time.Second, "x", func() error { return nil }) }); msg != "" {
			t.Fatalf("a condition that holds failed: %s", msg)
		}
	})
}
