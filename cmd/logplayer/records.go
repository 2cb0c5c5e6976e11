package main

// The values of append's command line, and how a client command calls its
// library function (client/report) and prints its answer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// messageArgs is the repeatable --topic TOPIC=VALUE: VALUE is literal text,
// @FILE, or @- for standard input. Never read from the environment or a file.
type messageArgs struct{ items []clireport.Value }

func (v *messageArgs) String() string { return "" }
func (v *messageArgs) Set(s string) error {
	topic, value, ok := strings.Cut(s, "=")
	if !ok || topic == "" {
		return fmt.Errorf("want TOPIC=VALUE, TOPIC=@FILE or TOPIC=@-")
	}
	v.items = append(v.items, clireport.Value{Topic: topic, Value: value})
	return nil
}
func (*messageArgs) repeatable() {}
func (*messageArgs) noEnv()      {}

// mutationArgs is --put TOPIC:KEY=VALUE or --delete TOPIC:KEY (shard
// mutations).
type mutationArgs struct {
	items []clireport.Mutation
	op    shardpb.Mutation_Op
}

func (v *mutationArgs) String() string { return "" }
func (v *mutationArgs) Set(s string) error {
	m, err := clireport.ParseMutation(v.op, s)
	if err != nil {
		return err
	}
	v.items = append(v.items, m)
	return nil
}
func (*mutationArgs) repeatable() {}
func (*mutationArgs) noEnv()      {}

// call dials the cluster and runs fn within --timeout. fn's error is told
// as what's: an InputError is a usage error, a Refusal "what refused: ...",
// any other clientFlags.describe's line.
func call[T any](ctx context.Context, s *sys, c *clientFlags, what string, fn func(context.Context, *client.Client) (T, error)) (T, error) {
	var zero T
	cl, err := c.dial(s)
	if err != nil {
		return zero, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, err := fn(ctx, cl)
	var bad *clireport.InputError
	var no *clireport.Refusal
	switch {
	case err == nil:
		return v, nil
	case errors.As(err, &bad):
		return zero, usage(bad)
	case errors.As(err, &no):
		return zero, fmt.Errorf("%s refused: %w", what, no)
	}
	return zero, c.describe(ctx, what, err)
}

// usage is err, or the usage error it is when a clireport.InputError.
func usage(err error) error {
	if bad := (*clireport.InputError)(nil); errors.As(err, &bad) {
		return usagef("%s", bad)
	}
	return err
}

// show calls fn (see call) and prints its answer: one JSON line, or text.
func show[V clireport.View](ctx context.Context, s *sys, c *clientFlags, what string, asJSON bool, fn func(context.Context, *client.Client) (V, error)) error {
	v, err := call(ctx, s, c, what, fn)
	switch {
	case err != nil:
		return err
	case asJSON:
		return writeJSONLine(s.stdout, v)
	}
	return v.WriteText(s.stdout)
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
