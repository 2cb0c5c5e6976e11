package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The target registry and the LogPlayer group views (issue #13).

func init() {
	app.Register(&cli.Command{
		Name:     "target add",
		Required: []string{"id", "target-addr", "topics"},
		New:      func() cli.Runner { return &targetCmd{op: "add"} },
	})
	app.Register(&cli.Command{
		Name:     "target remove",
		Required: []string{"id"},
		New:      func() cli.Runner { return &targetCmd{op: "remove"} },
	})
	app.Register(&cli.Command{
		Name: "target list",
		New:  func() cli.Runner { return &targetCmd{op: "list"} },
	})
	app.Register(&cli.Command{
		Name:     "target describe",
		Required: []string{"id"},
		New:      func() cli.Runner { return &targetCmd{op: "describe"} },
	})
	app.Register(&cli.Command{
		Name: "players",
		New:  func() cli.Runner { return &targetCmd{op: "players"} },
	})
}

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
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.Timeout)
	defer cancel()
	what := "target " + c.op
	switch c.op {
	case "add":
		t := &logstorepb.RegisteredTarget{Id: c.id, Address: c.targetAddr.Addr, Topics: c.topics.Items}
		if err := cl.RegisterTarget(ctx, t); err != nil {
			return c.conn.Describe(ctx, what, err)
		}
		return c.done(s.Stdout, fmt.Sprintf("registered target %s at %s (topics %s)", c.id, t.Address, strings.Join(t.Topics, ",")))
	case "remove":
		if err := cl.UnregisterTarget(ctx, c.id); err != nil {
			return c.conn.Describe(ctx, what, err)
		}
		return c.done(s.Stdout, "removed target "+c.id)
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

func (c *targetCmd) list(ctx context.Context, s *cli.Sys, cl *client.Client, what string) error {
	resp, err := cl.ListRegisteredTargets(ctx, c.group)
	if err != nil {
		return c.conn.Describe(ctx, what, err)
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
			return writeJSONLine(s.Stdout, out[0])
		}
		return writeJSONLine(s.Stdout, map[string]any{"targets": out})
	}
	return clireport.WriteTargets(s.Stdout, out)
}

func (c *targetCmd) players(ctx context.Context, s *cli.Sys, cl *client.Client) error {
	groups := []string{c.group}
	if c.group == "" {
		st, err := cl.LeaderStatus(ctx)
		if err != nil {
			return c.conn.Describe(ctx, "players", err)
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
			return c.conn.Describe(ctx, "players", err)
		}
		out = append(out, clireport.GroupOf(d))
	}
	if c.asJSON {
		return writeJSONLine(s.Stdout, map[string]any{"groups": out})
	}
	clireport.WriteGroups(s.Stdout, out)
	return nil
}
