package main

// The values of append's command line (client/report turns them into
// messages: Slices).

import (
	"fmt"
	"strings"

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
func (*messageArgs) Repeatable() {}
func (*messageArgs) NoEnv()      {}

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
func (*mutationArgs) Repeatable() {}
func (*mutationArgs) NoEnv()      {}
