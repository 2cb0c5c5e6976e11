package storeconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
)

// TestDrain: every value reaches fn in order; io.EOF (also wrapped) ends
// the read with nil; a read error goes through readErr (as it is without
// one); fn's error is returned as it is, without readErr, and stops the
// read.
func TestDrain(t *testing.T) {
	type step struct {
		v   int
		err error
	}
	reader := func(steps ...step) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			if len(steps) == 0 {
				t.Fatal("next called after the end")
			}
			s := steps[0]
			steps = steps[1:]
			return s.v, s.err
		}
	}
	broken := errors.New("broken stream")
	stop := errors.New("stop")
	wrap := func(err error) error { return fmt.Errorf("read: %w", err) }

	var got []int
	collect := func(v int) error { got = append(got, v); return nil }
	if err := Drain(context.Background(), reader(step{v: 1}, step{v: 2}, step{err: fmt.Errorf("end: %w", io.EOF)}), wrap, collect); err != nil {
		t.Fatalf("Drain to EOF: %v", err)
	}
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("fn saw %v, want [1 2]", got)
	}

	got = nil
	err := Drain(context.Background(), reader(step{v: 1}, step{err: broken}), wrap, collect)
	if !errors.Is(err, broken) || err.Error() != "read: broken stream" {
		t.Fatalf("Drain of a broken stream: %v, want readErr's word for it", err)
	}
	if !slices.Equal(got, []int{1}) {
		t.Fatalf("fn saw %v, want [1]", got)
	}
	if err := Drain(context.Background(), reader(step{err: broken}), nil, collect); err != broken {
		t.Fatalf("Drain without readErr: %v, want the read error as it is", err)
	}

	got = nil
	err = Drain(context.Background(), reader(step{v: 1}, step{v: 2}), wrap, func(v int) error {
		got = append(got, v)
		if v == 2 {
			return stop
		}
		return nil
	})
	if err != stop || !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("Drain with fn failing at 2: %v after %v, want %v after [1 2]", err, got, stop)
	}
}
