package main

import (
	"context"
	"flag"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The target registry and the LogPlayer group views (issue #13).

func init() {
	register(&command{
		name:     "target add",
		summary:  "register a delivery target in the LogStore (or replace it)",
		synopsis: "--id ID --target-addr HOST:PORT --topics LIST [--addr LIST] [--json]",
		about: `
Adds the target to the LogStore's target registry (a Raft command, admin only):
every LogPlayer of a group sees it, and one live member of each group delivers
it the given topics. Registering an existing id replaces its address and topics
(its owner and fencing token stay). A new target holds retention (its delivery
consumer row starts at LSN 0) until its first owner reports.

--target-addr is the target's Deliver address (--addr names the LogStore, as in
every client command).`,
		examples: []string{
			"logplayer target add --id shard-0 --target-addr 127.0.0.1:7500 --topics shard-0",
			"logplayer target add --id events --target-addr 10.0.0.5:7510 --topics orders,payments",
		},
		required: []string{"id", "target-addr", "topics"},
		new:      func() runner { return &targetCmd{op: "add"} },
	})
	register(&command{
		name:     "target remove",
		summary:  "unregister a delivery target",
		synopsis: "--id ID [--addr LIST] [--json]",
		about: `
Removes the target from the registry and from its owner in every group, and
drops its delivery consumer row (its retention floor). Removing an unknown id
fails with UNKNOWN_TARGET.`,
		examples: []string{"logplayer target remove --id shard-0"},
		required: []string{"id"},
		new:      func() runner { return &targetCmd{op: "remove"} },
	})
	register(&command{
		name:     "target list",
		summary:  "list the registered targets with their owner and token in each group",
		synopsis: "[--group NAME] [--addr LIST] [--json]",
		about:    "Lists the target registry; each target with its owner and fencing token in every group (or in --group only).",
		examples: []string{"logplayer target list", "logplayer target list --group players --json"},
		new:      func() runner { return &targetCmd{op: "list"} },
	})
	register(&command{
		name:     "target describe",
		summary:  "show one registered target: address, topics, owners and tokens",
		synopsis: "--id ID [--addr LIST] [--json]",
		about:    "Shows one registered target with its owner, fencing token and assignment time in every group.",
		examples: []string{"logplayer target describe --id shard-0"},
		required: []string{"id"},
		new:      func() runner { return &targetCmd{op: "describe"} },
	})
	register(&command{
		name:     "players",
		summary:  "show the LogPlayer groups: members, leases, owners and tokens",
		synopsis: "[--group NAME] [--addr LIST] [--json]",
		about: `
Shows each LogPlayer group (or --group only): its members with the time left on
their leases (in log time: the leader's clock as of the last applied entry),
each target's owner and fencing token, the generation and the count of
reassignments (changes of owner). A target with no owner (-) waits for a live
member.`,
		examples: []string{"logplayer players", "logplayer players --group players --json"},
		new:      func() runner { return &targetCmd{op: "players"} },
	})
}

type targetCmd struct {
	op         string
	conn       clientFlags
	id         string
	targetAddr addrValue
	topics     stringList
	group      string
	asJSON     bool
}

func (c *targetCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
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

func (c *targetCmd) run(ctx context.Context, s *sys) error {
	what := "target " + c.op
	switch c.op {
	case "add":
		t := &logstorepb.RegisteredTarget{Id: c.id, Address: c.targetAddr.addr, Topics: c.topics.items}
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
