package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
)

func init() {
	register(&command{
		name:     "tail",
		summary:  "print committed transactions (or one topic's messages) as JSON lines",
		synopsis: "[--from LSN | --topic TOPIC [--offset N]] [--follow] [flags]",
		about: `
Prints the log as JSON lines, one per transaction: its LSN, leader timestamp
and slices (topic, first offset, messages). With --topic it prints one topic's
messages by offset instead, one per line.

Without --follow it stops at the head the cluster had when it started (or at
--to); with --follow it waits for new transactions until interrupted. A
--topic that was never written is an error (UNKNOWN_TOPIC), so a misspelt
name fails at once; --follow --wait-for-topic waits for its first message.
Message values are shown as JSON when they are JSON, decoded when they are
shard mutations, as text when UTF-8, else in base64.`,
		examples: []string{
			"logplayer tail                         # the whole log, then exit",
			"logplayer tail --from 1200 --follow    # from LSN 1200, then wait for more",
			"logplayer tail --filter orders,inventory --new --follow",
			"logplayer tail --topic orders --offset 10 --limit 5",
		},
		new: func() runner { return &tailCmd{} },
	})
}

type tailCmd struct {
	conn      clientFlags
	from, to  uint64
	newOnly   bool
	filter    stringList
	topic     string
	offset    uint64
	follow    bool
	limit     uint64
	offsetSet bool
	waitTopic bool
}

func (c *tailCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.Uint64Var(&c.from, "from", 1, "first `LSN` to print")
	fs.Uint64Var(&c.to, "to", 0, "last `LSN` to print (default: the head at start, or none with --follow)")
	fs.BoolVar(&c.newOnly, "new", false, "start after the current head (only new transactions)")
	fs.Var(&c.filter, "filter", "only these `topics` (comma-separated; transactions without them are skipped)")
	fs.StringVar(&c.topic, "topic", "", "print this `topic`'s messages by offset instead of transactions")
	fs.Func("offset", "first `offset` of --topic (default 0)", func(s string) error {
		c.offsetSet = true
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return errors.New("want a non-negative integer")
		}
		c.offset = n
		return nil
	})
	fs.BoolVar(&c.follow, "follow", false, "keep waiting for new data until interrupted")
	fs.Uint64Var(&c.limit, "limit", 0, "stop after this many `lines` (0: no limit)")
	fs.BoolVar(&c.waitTopic, "wait-for-topic", false, "with --topic and --follow: wait for a topic that was never written (default: fail with UNKNOWN_TOPIC)")
}

func (c *tailCmd) run(ctx context.Context, s *sys) error {
	if c.topic == "" && c.offsetSet {
		return usagef("--offset needs --topic")
	}
	if c.topic != "" && (c.from != 1 || c.to != 0 || c.newOnly || len(c.filter.items) > 0) {
		return usagef("--topic reads by offset: it does not combine with --from, --to, --new or --filter")
	}
	if c.waitTopic && (c.topic == "" || !c.follow) {
		return usagef("--wait-for-topic needs --topic and --follow")
	}
	if c.from == 0 {
		return usagef("--from must be at least 1 (LSNs start at 1)")
	}
	if c.follow && c.to != 0 {
		return usagef("--follow and --to exclude each other")
	}
	err := c.tail(ctx, s)
	if c.follow && ctx.Err() != nil {
		return nil // interrupted: the normal end of a follow
	}
	return err
}

func (c *tailCmd) tail(ctx context.Context, s *sys) error {
	cl, err := c.conn.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	var werr error // a topic's lines' write error is returned as it is
	err = clireport.Tail(ctx, cl, clireport.TailConfig{From: c.from, To: c.to, New: c.newOnly, Topics: c.filter.items,
		Topic: c.topic, Offset: c.offset, WaitForTopic: c.waitTopic, Follow: c.follow, Limit: c.limit, Timeout: c.conn.timeout},
		func(line any) error { werr = writeJSONLine(s.stdout, line); return werr })
	var stopped *clireport.Stopped
	switch {
	case err == nil || (c.topic != "" && werr != nil && errors.Is(err, werr)):
		return err
	case errors.As(err, &stopped):
		return stopped.Err
	case c.topic != "" && errors.Is(err, client.ErrUnknownTopic):
		return fmt.Errorf("%w (to wait for its first message: --follow --wait-for-topic)", c.conn.describe(ctx, "tail", apierr.UnknownTopic(c.topic)))
	}
	return c.conn.describe(ctx, "tail", err)
}
