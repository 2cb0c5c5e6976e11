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
	"github.com/logplayer/logplayer/internal/cli"
)

type tailCmd struct {
	conn      cli.ClientFlags
	from, to  uint64
	newOnly   bool
	filter    cli.StringList
	topic     string
	offset    uint64
	follow    bool
	limit     uint64
	offsetSet bool
	waitTopic bool
}

func (c *tailCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
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

func (c *tailCmd) Run(ctx context.Context, s *cli.Sys) error {
	if c.topic == "" && c.offsetSet {
		return cli.Usagef("--offset needs --topic")
	}
	if c.topic != "" && (c.from != 1 || c.to != 0 || c.newOnly || len(c.filter.Items) > 0) {
		return cli.Usagef("--topic reads by offset: it does not combine with --from, --to, --new or --filter")
	}
	if c.waitTopic && (c.topic == "" || !c.follow) {
		return cli.Usagef("--wait-for-topic needs --topic and --follow")
	}
	if c.from == 0 {
		return cli.Usagef("--from must be at least 1 (LSNs start at 1)")
	}
	if c.follow && c.to != 0 {
		return cli.Usagef("--follow and --to exclude each other")
	}
	err := c.tail(ctx, s)
	if c.follow && ctx.Err() != nil {
		return nil // interrupted: the normal end of a follow
	}
	return err
}

func (c *tailCmd) tail(ctx context.Context, s *cli.Sys) error {
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	var werr error // a topic's lines' write error is returned as it is
	err = clireport.Tail(ctx, cl, clireport.TailConfig{From: c.from, To: c.to, New: c.newOnly, Topics: c.filter.Items,
		Topic: c.topic, Offset: c.offset, WaitForTopic: c.waitTopic, Follow: c.follow, Limit: c.limit, Timeout: c.conn.Timeout},
		func(line any) error { werr = writeJSONLine(s.Stdout, line); return werr })
	var stopped *clireport.Stopped
	switch {
	case err == nil || (c.topic != "" && werr != nil && errors.Is(err, werr)):
		return err
	case errors.As(err, &stopped):
		return stopped.Err
	case c.topic != "" && errors.Is(err, client.ErrUnknownTopic):
		return fmt.Errorf("%w (to wait for its first message: --follow --wait-for-topic)", c.conn.Describe(ctx, "tail", apierr.UnknownTopic(c.topic)))
	}
	return c.conn.Describe(ctx, "tail", err)
}
