//go:build !failpoints

package failpoint

// Inject returns nil: failpoints are compiled out.
func Inject(string) error { return nil }
