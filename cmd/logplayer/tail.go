package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

func init() {
	app.Register(&cli.Command{
		Name: "tail",
		New:  func() cli.Runner { return &tailCmd{} },
	})
}

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
	if c.topic != "" {
		return c.tailTopic(ctx, s, cl)
	}
	from, to := c.from, c.to
	if c.newOnly || (to == 0 && !c.follow) {
		st, err := c.conn.LeaderStatus(ctx, cl, "tail")
		if err != nil {
			return err
		}
		if c.newOnly {
			from = st.HeadLsn + 1
		}
		if to == 0 && !c.follow {
			to = st.HeadLsn
		}
	}
	if !c.follow && to < from {
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var printed uint64
	errLimit := errors.New("limit reached")
	err = cl.Read(rctx, &logstorepb.ReadRequest{FromLsn: from, ToLsn: to, Topics: c.filter.Items}, func(resp *logstorepb.ReadResponse) error {
		for _, t := range resp.Transactions {
			if err := writeJSONLine(s.Stdout, clireport.TxnOf(t)); err != nil {
				return err
			}
			printed++
			if c.limit > 0 && printed >= c.limit {
				return errLimit
			}
		}
		return nil
	})
	if errors.Is(err, errLimit) {
		return nil
	}
	if err != nil && ctx.Err() == nil {
		return c.conn.Describe(ctx, "tail", err)
	}
	return err
}

// tailTopic reads one topic by offset (client.TopicReader: any node,
// resuming elsewhere after a failure). Without --follow it stops at the
// topic's end as the leader sees it at the start.
func (c *tailCmd) tailTopic(ctx context.Context, s *cli.Sys, cl *client.Client) error {
	limit := c.limit
	if !c.follow {
		// The topic's end as the leader sees it (DescribeTopic: Status
		// lists only the first topics).
		end, known := uint64(0), false
		dctx, cancel := context.WithTimeout(ctx, c.conn.Timeout)
		info, err := cl.DescribeTopic(dctx, c.topic)
		cancel()
		switch {
		case err == nil:
			end, known = info.NextOffset, true
		case status.Code(err) == codes.Unimplemented: // a leader older than DescribeTopic: its Status lists every topic
			st, err := c.conn.LeaderStatus(ctx, cl, "tail")
			if err != nil {
				return err
			}
			for _, t := range st.Topics {
				if t.Topic == c.topic {
					end, known = t.NextOffset, true
				}
			}
		case apierr.CodeOf(err) != logstorepb.ErrorCode_UNKNOWN_TOPIC:
			return c.conn.Describe(ctx, "tail", err)
		}
		if !known {
			return c.unknownTopic(ctx)
		}
		if end <= c.offset {
			return nil
		}
		if limit == 0 || end-c.offset < limit {
			limit = end - c.offset
		}
	}
	r, err := cl.NewTopicReader(client.TopicReaderConfig{Topic: c.topic, FromOffset: types.Offset(c.offset), Limit: limit, WaitForTopic: c.waitTopic})
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		m, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, client.ErrUnknownTopic) {
			return c.unknownTopic(ctx)
		}
		if err != nil {
			return c.conn.Describe(ctx, "tail", err)
		}
		if err := writeJSONLine(s.Stdout, clireport.TopicMessageOf(c.topic, m)); err != nil {
			return err
		}
	}
}

// unknownTopic is tail's answer for a topic that was never written.
func (c *tailCmd) unknownTopic(ctx context.Context) error {
	return fmt.Errorf("%w (to wait for its first message: --follow --wait-for-topic)", c.conn.Describe(ctx, "tail", apierr.UnknownTopic(c.topic)))
}
