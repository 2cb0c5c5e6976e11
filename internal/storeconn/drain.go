package storeconn

import (
	"context"
	"errors"
	"io"
)

// Drain reads a reader to its end: it calls fn with each value next
// returns until next returns io.EOF (Drain returns nil) or another error
// (Drain returns readErr's word for it, or the error itself when readErr is
// nil), or fn fails (Drain returns fn's error as it is). next is a reader's
// Next (LogReader.Next, client.TopicReader.Next); readErr says what a
// failed read means to the caller, which may differ from what fn's
// failure means.
func Drain[T any](ctx context.Context, next func(context.Context) (T, error), readErr func(error) error, fn func(T) error) error {
	for {
		v, err := next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if readErr != nil {
				return readErr(err)
			}
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
	}
}
