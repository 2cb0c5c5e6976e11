package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

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
	cl, err := c.conn.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	what := "target " + c.op
	switch c.op {
	case "add":
		t := &logstorepb.RegisteredTarget{Id: c.id, Address: c.targetAddr.addr, Topics: c.topics.items}
		if err := cl.RegisterTarget(ctx, t); err != nil {
			return c.conn.describe(ctx, what, err)
		}
		return c.done(s.stdout, fmt.Sprintf("registered target %s at %s (topics %s)", c.id, t.Address, strings.Join(t.Topics, ",")))
	case "remove":
		if err := cl.UnregisterTarget(ctx, c.id); err != nil {
			return c.conn.describe(ctx, what, err)
		}
		return c.done(s.stdout, "removed target "+c.id)
	case "list", "describe":
		return c.list(ctx, s, cl, what)
	default:
		return c.players(ctx, s, cl)
	}
}

// done prints a write's result: text, or {"ok": true, "message": ...}.
func (c *targetCmd) done(w io.Writer, msg string) error {
	if c.asJSON {
		return writeJSONLine(w, map[string]any{"ok": true, "message": msg})
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

func (c *targetCmd) list(ctx context.Context, s *sys, cl *client.Client, what string) error {
	resp, err := cl.ListRegisteredTargets(ctx, c.group)
	if err != nil {
		return c.conn.describe(ctx, what, err)
	}
	only := ""
	if c.op == "describe" {
		only = c.id
	}
	out := clireport.TargetsOf(resp, only)
	if c.op == "describe" && len(out) == 0 {
		return fmt.Errorf("%s refused: UNKNOWN_TARGET: no registered target %q", what, c.id)
	}
	if c.asJSON {
		if c.op == "describe" {
			return writeJSONLine(s.stdout, out[0])
		}
		return writeJSONLine(s.stdout, map[string]any{"targets": out})
	}
	return clireport.WriteTargets(s.stdout, out)
}

func (c *targetCmd) players(ctx context.Context, s *sys, cl *client.Client) error {
	groups := []string{c.group}
	if c.group == "" {
		st, err := cl.LeaderStatus(ctx)
		if err != nil {
			return c.conn.describe(ctx, "players", err)
		}
		groups = groups[:0]
		for _, g := range st.PlayerGroups {
			groups = append(groups, g.Group)
		}
	}
	out := []clireport.Group{}
	for _, name := range groups {
		d, err := cl.DescribeGroup(ctx, name)
		if err != nil {
			return c.conn.describe(ctx, "players", err)
		}
		out = append(out, clireport.GroupOf(d))
	}
	if c.asJSON {
		return writeJSONLine(s.stdout, map[string]any{"groups": out})
	}
	clireport.WriteGroups(s.stdout, out)
	return nil
}
