package api

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// The convoy hold on a fake clock (testing/synctest): the batch an
// answered client would join waits exactly the hold window, no more, and
// goes at once when the client is back sooner.
func TestAggregatorHoldTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, r := testAggregator(t, func(a *Aggregator) { a.holdWindow = holdFor(5 * time.Millisecond) })
		resA := submitAsync(a, "a")
		e1 := r.next(t)
		resB := submitAsync(a, "b") // waits for e1
		synctest.Wait()
		if !intakeTaken(a, 2) {
			t.Fatal("b not taken into the batch")
		}
		e1.resolve()
		wait(t, resA)
		// a is not back: b goes alone when the window ends, 5ms after e1
		// resolved (no time passed since).
		start := time.Now()
		e2 := r.next(t)
		if held, got := time.Since(start), ids(e2); held != 5*time.Millisecond || fmt.Sprint(got) != "[b]" {
			t.Fatalf("entry %v after %v, want [b] after the 5ms hold", got, held)
		}
		e2.resolve()
		wait(t, resB)

		// b is back after 3ms, with c queued behind e3: c and b go then,
		// before the window ends.
		resC := submitAsync(a, "c")
		e3 := r.next(t)
		resD := submitAsync(a, "d")
		synctest.Wait()
		e3.resolve()
		wait(t, resC)
		start = time.Now()
		time.Sleep(3 * time.Millisecond)
		resC = submitAsync(a, "c")
		e4 := r.next(t)
		if held, got := time.Since(start), ids(e4); held != 3*time.Millisecond || fmt.Sprint(got) != "[d c]" {
			t.Fatalf("entry %v after %v, want [d c] as soon as c is back (3ms)", got, held)
		}
		e4.resolve()
		wait(t, resC)
		wait(t, resD)
	})
}

// The default window is holdMargin × the measured return time, while that
// is shorter than a commit: commits take 4ms, the client comes back in
// 2ms, so a batch waiting for it holds 3ms.
func TestAggregatorDefaultHoldWindow(t *testing.T) {
	const back = 2 * time.Millisecond
	if held, got := holdAfterReturn(t, nil, 4*time.Millisecond, back); held != 3*time.Millisecond || got != "[b]" {
		t.Fatalf("entry %v after %v, want [b] after holdMargin × %v", got, held, back)
	}
}

// AggregatorConfig.HoldReturnRatio: commits take 2ms and the client comes
// back in 3ms, slower than a commit. At the default ratio (1) the batch
// waiting for it goes out at once; at ratio 3 it holds holdMargin × 3ms.
func TestAggregatorHoldReturnRatio(t *testing.T) {
	for _, tc := range []struct {
		ratio float64
		held  time.Duration
	}{{0, 0}, {3, 4500 * time.Microsecond}} {
		configure := func(c *AggregatorConfig) { c.HoldReturnRatio = tc.ratio }
		if held, got := holdAfterReturn(t, configure, 2*time.Millisecond, 3*time.Millisecond); held != tc.held || got != "[b]" {
			t.Fatalf("ratio %v: entry %v after %v, want [b] after %v", tc.ratio, got, held, tc.held)
		}
	}
}

// holdAfterReturn runs, in a synctest bubble of its own (a fake clock:
// its sleeps take no real time), an Aggregator built with configure: client
// a's entries commit in commit and a comes back back after each answer; b
// queues behind a's second entry. It returns how long b's batch is held
// after that entry resolves (a, whose return was timed once, is not coming
// back) and the ids of the entry it goes out in.
func holdAfterReturn(t *testing.T, configure func(*AggregatorConfig), commit, back time.Duration) (held time.Duration, got string) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		a, r := testAggregatorConfig(t, configure, nil)
		res := submitAsync(a, "a")
		e := r.next(t)
		time.Sleep(commit)
		e.resolve()
		wait(t, res)
		time.Sleep(back) // nothing timed yet: a goes out at once
		res = submitAsync(a, "a")
		e = r.next(t)
		resB := submitAsync(a, "b")
		synctest.Wait()
		time.Sleep(commit)
		e.resolve()
		wait(t, res)
		start := time.Now()
		e = r.next(t)
		held, got = time.Since(start), fmt.Sprint(ids(e))
		e.resolve()
		wait(t, resB)
	})
	return held, got
}
