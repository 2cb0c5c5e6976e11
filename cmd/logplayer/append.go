package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

type appendCmd struct {
	conn       cli.ClientFlags
	messages   messageArgs
	puts       mutationArgs
	deletes    mutationArgs
	key        string
	raw        bool
	producerID string
	sequence   uint64
	producer   string
	expect     expectArgs
}

func (c *appendCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	c.puts.op, c.deletes.op = shardpb.Mutation_PUT, shardpb.Mutation_DELETE
	fs.Var(&c.messages, "topic", "a message `TOPIC=VALUE` (VALUE: JSON text, @FILE or @-); repeatable")
	fs.Var(&c.puts, "put", "a shard mutation `TOPIC:KEY=VALUE` (PUT); repeatable")
	fs.Var(&c.deletes, "delete", "a shard mutation `TOPIC:KEY` (DELETE); repeatable")
	fs.StringVar(&c.key, "key", "", "message `key` of every message")
	fs.BoolVar(&c.raw, "raw", false, "send --topic values as raw bytes, not checked as JSON")
	fs.StringVar(&c.producerID, "producer-id", "", "idempotent producer `id` (with --sequence)")
	fs.Uint64Var(&c.sequence, "sequence", 0, "the producer's `sequence` number of this append (first is 1)")
	fs.StringVar(&c.producer, "producer", "", "append as the registered producer `NAME` (InitProducer; fences older instances of NAME)")
	fs.Var(&c.expect, "expect", "condition `TOPIC=OFFSET`: TOPIC's next offset must be OFFSET; repeatable")
}

func (c *appendCmd) Run(ctx context.Context, s *cli.Sys) error {
	if len(c.messages.items)+len(c.puts.items)+len(c.deletes.items) == 0 {
		return cli.Usagef("nothing to append: give at least one --topic, --put or --delete")
	}
	if (c.producerID == "") != (c.sequence == 0) {
		return cli.Usagef("--producer-id and --sequence go together")
	}
	if c.producer != "" && c.producerID != "" {
		return cli.Usagef("--producer and --producer-id exclude each other")
	}
	var key []byte
	if c.key != "" {
		key = []byte(c.key)
	}
	slices, err := clireport.Slices(c.messages.items, append(c.puts.items, c.deletes.items...), key, c.raw, s.Stdin)
	if err != nil {
		return usage(err)
	}
	req := &logstorepb.AppendRequest{Slices: slices, ProducerId: c.producerID, Sequence: c.sequence, Conditions: c.expect.conds}
	res, err := call(ctx, s, &c.conn, "append", func(ctx context.Context, cl *client.Client) (*clireport.AppendResult, error) {
		return clireport.Append(ctx, cl, req, c.producer)
	})
	if err != nil {
		return err
	}
	return writeJSONLine(s.Stdout, res)
}

// expectArgs is the repeatable --expect TOPIC=OFFSET.
type expectArgs struct{ conds []*logstorepb.Condition }

func (v *expectArgs) String() string { return "" }
func (v *expectArgs) Set(s string) error {
	topic, off, ok := strings.Cut(s, "=")
	n, err := strconv.ParseUint(off, 10, 64)
	if !ok || topic == "" || err != nil {
		return fmt.Errorf("want TOPIC=OFFSET, e.g. orders=12")
	}
	v.conds = append(v.conds, &logstorepb.Condition{Topic: topic, ExpectedNextOffset: n})
	return nil
}
func (*expectArgs) Repeatable() {}
func (*expectArgs) NoEnv()      {}
