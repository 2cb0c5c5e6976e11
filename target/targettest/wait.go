package targettest

import (
	"context"
	"testing"
	"time"
)

// WaitMax is the deadline of Context and WaitFor: generous, because tests
// share two cores with the whole team.
const WaitMax = 30 * time.Second

// Context returns a context that ends after WaitMax or at the test's end.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), WaitMax)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond every 2 ms until it holds, failing the test after WaitMax.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitMax)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", WaitMax, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
