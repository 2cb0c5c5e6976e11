package targettest

import (
	"context"
	"testing"

	"github.com/logplayer/logplayer/internal/testwait"
)

// Context returns a context that ends after testwait.Max or at the test's
// end.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Max)
	t.Cleanup(cancel)
	return ctx
}
