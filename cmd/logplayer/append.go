package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

func init() {
	register(&command{
		name:     "append",
		summary:  "append one transaction to one or more topics, atomically",
		synopsis: "--topic TOPIC=VALUE [--topic ...] [--put TOPIC:KEY=VALUE] [flags]",
		about: `
Appends one transaction: every --topic, --put and --delete becomes a message
of its topic's slice, and all slices commit together or not at all. Prints the
transaction's LSN and each topic's first offset as one JSON line.

A --topic VALUE is JSON (checked and sent compacted) unless --raw; @FILE reads
a file, @- standard input. --put and --delete encode shard mutations
(shardpb.Mutation) for the reference shard targets. --producer-id with
--sequence makes the append idempotent with a legacy unregistered producer id:
a retry of the same sequence returns the first result instead of writing again
(while the cluster still holds the id's row). --producer NAME registers NAME
(fencing any older instance of it) and appends through the SDK's producer:
its retries within this command never write twice, and an unknown outcome
exits with an in-doubt error instead of a success. --expect TOPIC=OFFSET makes it
conditional: it fails, writing nothing, unless TOPIC's next offset is OFFSET.`,
		examples: []string{
			`logplayer append --topic orders=@order.json --topic inventory='{"sku":1}'`,
			`logplayer append --topic orders='{"id":7}' --put shard-0:user/7=alice --put shard-2:sku/1=3 --key user/7`,
			`echo '{"id":8}' | logplayer append --topic orders=@- --producer-id checkout-1 --sequence 42`,
			`logplayer append --topic orders='{"id":8}' --producer checkout   # registered producer`,
			`logplayer append --topic orders='{"id":9}' --expect orders=12   # only if orders' next offset is 12`,
		},
		new: func() runner { return &appendCmd{} },
	})
}

type appendCmd struct {
	conn       clientFlags
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

func (c *appendCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
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

func (c *appendCmd) run(ctx context.Context, s *sys) error {
	if len(c.messages.items)+len(c.puts.items)+len(c.deletes.items) == 0 {
		return usagef("nothing to append: give at least one --topic, --put or --delete")
	}
	if (c.producerID == "") != (c.sequence == 0) {
		return usagef("--producer-id and --sequence go together")
	}
	if c.producer != "" && c.producerID != "" {
		return usagef("--producer and --producer-id exclude each other")
	}
	var key []byte
	if c.key != "" {
		key = []byte(c.key)
	}
	slices, err := clireport.Slices(c.messages.items, append(c.puts.items, c.deletes.items...), key, c.raw, s.stdin)
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
	return writeJSONLine(s.stdout, res)
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
func (*expectArgs) repeatable() {}
func (*expectArgs) noEnv()      {}
