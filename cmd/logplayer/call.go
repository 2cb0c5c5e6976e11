package main

// How a client command calls its client/report function and prints its
// answer: validate flags, call, render.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
)

// call dials the cluster and runs fn within --timeout. fn's error is told
// as what's: an InputError is a usage error, a Refusal "what refused: ...",
// any other cli.ClientFlags.Describe's line.
func call[T any](ctx context.Context, s *cli.Sys, c *cli.ClientFlags, what string, fn func(context.Context, *client.Client) (T, error)) (T, error) {
	var zero T
	cl, err := c.Dial(s)
	if err != nil {
		return zero, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	v, err := fn(ctx, cl)
	var bad *clireport.InputError
	var no *clireport.Refusal
	switch {
	case err == nil:
		return v, nil
	case errors.As(err, &bad):
		return zero, cli.Usagef("%s", bad)
	case errors.As(err, &no):
		return zero, fmt.Errorf("%s refused: %w", what, no)
	}
	return zero, c.Describe(ctx, what, err)
}

// usage is err, or the usage error it is when a clireport.InputError.
func usage(err error) error {
	if bad := (*clireport.InputError)(nil); errors.As(err, &bad) {
		return cli.Usagef("%s", bad)
	}
	return err
}

// show calls fn (see call) and prints its answer: one JSON line, or text.
func show[V clireport.View](ctx context.Context, s *cli.Sys, c *cli.ClientFlags, what string, asJSON bool, fn func(context.Context, *client.Client) (V, error)) error {
	v, err := call(ctx, s, c, what, fn)
	switch {
	case err != nil:
		return err
	case asJSON:
		return writeJSONLine(s.Stdout, v)
	}
	return v.WriteText(s.Stdout)
}

// writeJSONLine writes v as one line.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}
