package main

import (
	"context"
	"flag"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The target registry and the LogPlayer group views (issue #13).

type targetCmd struct {
	op         string
	conn       cli.ClientFlags
	id         string
	targetAddr cli.AddrValue
	topics     cli.StringList
	group      string
	asJSON     bool
}

func (c *targetCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object instead of text")
	switch c.op {
	case "add":
		fs.StringVar(&c.id, "id", "", "the target `id` ([A-Za-z0-9._-])")
		fs.Var(&c.targetAddr, "target-addr", "the target's Deliver `address` (host:port)")
		fs.Var(&c.topics, "topics", "the `topics` delivered to it, comma-separated")
	case "remove", "describe":
		fs.StringVar(&c.id, "id", "", "the target `id`")
	case "list", "players":
		fs.StringVar(&c.group, "group", "", "only this LogPlayer group (default: every group)")
	}
}

func (c *targetCmd) Run(ctx context.Context, s *cli.Sys) error {
	what := "target " + c.op
	switch c.op {
	case "add":
		t := &logstorepb.RegisteredTarget{Id: c.id, Address: c.targetAddr.Addr, Topics: c.topics.Items}
		return show(ctx, s, &c.conn, what, c.asJSON, func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
			return clireport.RegisterTarget(ctx, cl, t)
		})
	case "remove":
		return show(ctx, s, &c.conn, what, c.asJSON, func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
			return clireport.UnregisterTarget(ctx, cl, c.id)
		})
	case "list":
		return show(ctx, s, &c.conn, what, c.asJSON, func(ctx context.Context, cl *client.Client) (clireport.TargetList, error) {
			return clireport.ListTargets(ctx, cl, c.group)
		})
	case "describe":
		return show(ctx, s, &c.conn, what, c.asJSON, func(ctx context.Context, cl *client.Client) (clireport.Target, error) {
			return clireport.DescribeTarget(ctx, cl, c.id)
		})
	}
	return show(ctx, s, &c.conn, "players", c.asJSON, func(ctx context.Context, cl *client.Client) (clireport.GroupList, error) {
		return clireport.Players(ctx, cl, c.group)
	})
}
