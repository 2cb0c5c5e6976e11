package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/types"
)

func init() {
	app.Register(&cli.Command{
		Name: "append",
		New:  func() cli.Runner { return &appendCmd{} },
	})
}

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

// appendResult is append's output line.
type appendResult struct {
	LSN       uint64            `json:"lsn"`
	Offsets   map[string]uint64 `json:"offsets"`
	Duplicate bool              `json:"duplicate,omitempty"`
	// --producer: the registered id, epoch and sequence used.
	ProducerID string `json:"producer_id,omitempty"`
	Epoch      uint64 `json:"epoch,omitempty"`
	Sequence   uint64 `json:"sequence,omitempty"`
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
	slices, err := buildSlices(c.messages.items, append(c.puts.items, c.deletes.items...), key, c.raw, s.Stdin)
	if err != nil {
		return err
	}
	req := &logstorepb.AppendRequest{Slices: slices, ProducerId: c.producerID, Sequence: c.sequence, Conditions: c.expect.conds}
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.Timeout)
	defer cancel()
	if c.producer != "" {
		return c.appendRegistered(ctx, s, cl, req)
	}
	resp, err := cl.Append(ctx, req)
	if err != nil {
		return c.conn.Describe(ctx, "append", err)
	}
	out := appendResult{LSN: resp.Lsn, Offsets: map[string]uint64{}, Duplicate: resp.Duplicate}
	for _, sr := range resp.Slices {
		out.Offsets[sr.Topic] = sr.FirstOffset
	}
	return writeJSONLine(s.Stdout, out)
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

// appendRegistered appends req through a client.Producer registered as
// --producer.
func (c *appendCmd) appendRegistered(ctx context.Context, s *cli.Sys, cl *client.Client, req *logstorepb.AppendRequest) error {
	p, err := cl.NewProducer(client.ProducerConfig{ID: c.producer, MaxInFlight: 1})
	if err != nil {
		return cli.Usagef("--producer: %v", err)
	}
	txn := client.NewTxn()
	for _, sl := range req.Slices {
		txn.AddMessages(sl.Topic, sl.Messages...)
	}
	for _, cond := range req.Conditions {
		txn.Expect(cond.Topic, types.Offset(cond.ExpectedNextOffset))
	}
	res, err := p.Append(ctx, txn)
	if err != nil {
		return c.conn.Describe(ctx, "append", err)
	}
	id, epoch := p.RegisteredID()
	out := appendResult{LSN: uint64(res.LSN), Offsets: map[string]uint64{}, Duplicate: res.Duplicate, ProducerID: id, Epoch: epoch, Sequence: res.Sequence}
	for topic, off := range res.Offsets {
		out.Offsets[topic] = uint64(off)
	}
	return writeJSONLine(s.Stdout, out)
}
