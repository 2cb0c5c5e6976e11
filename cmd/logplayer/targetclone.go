package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// `logplayer target clone` (issue #29): seed a new target from a sibling.

func init() {
	app.Register(&cli.Command{
		Name:     "target clone",
		Required: []string{"from", "to"},
		New:      func() cli.Runner { return &targetCloneCmd{} },
	})
}

type targetCloneCmd struct {
	conn     cli.ClientFlags
	from, to string
	toAddr   cli.AddrValue
	asJSON   bool
}

func (c *targetCloneCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object instead of text")
	fs.StringVar(&c.from, "from", "", "the sibling target `id` snapshotted")
	fs.StringVar(&c.to, "to", "", "the new target `id` seeded")
	fs.Var(&c.toAddr, "to-addr", "the new target's Deliver `address` when it is not registered yet")
}

// cloneRefusals name Clone's typed refusals on the command line.
var cloneRefusals = []struct {
	err  error
	name string
}{
	{target.ErrSiblingBehind, "SIBLING_BEHIND"},
	{target.ErrTopicsDiffer, "TOPICS_DIFFER"},
	{target.ErrOtherLogSnapshot, "OTHER_LOG"},
	{target.ErrTargetNotEmpty, "NOT_EMPTY"},
	{target.ErrUnknownSibling, "UNKNOWN_SIBLING"},
	{target.ErrCloneInvalid, "INVALID"},
}

func (c *targetCloneCmd) Run(ctx context.Context, s *cli.Sys) error {
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := target.Clone(ctx, target.CloneConfig{
		From: types.TargetID(c.from), To: types.TargetID(c.to), ToAddress: c.toAddr.Addr,
		Registry: cl, Dial: c.conn.DialOther, Logger: s.Log,
	})
	if err != nil {
		for _, r := range cloneRefusals {
			if errors.Is(err, r.err) {
				return fmt.Errorf("refused: %s: %w", r.name, err)
			}
		}
		return c.conn.Describe(ctx, "target clone", err)
	}
	msg := fmt.Sprintf("cloned %s into %s at applied lsn %d (%d bytes; the log's first retained lsn is %d); %s registered: the LogPlayer delivers the tail",
		c.from, c.to, res.State.AppliedLSN, res.Bytes, res.FirstLSN, c.to)
	if res.AlreadyRestored {
		msg = fmt.Sprintf("%s already held applied lsn %d (an earlier clone restored it); registered it: the LogPlayer delivers the tail",
			c.to, res.State.AppliedLSN)
	}
	if c.asJSON {
		return writeJSONLine(s.Stdout, map[string]any{"ok": true, "message": msg, "applied_lsn": uint64(res.State.AppliedLSN),
			"first_lsn": uint64(res.FirstLSN), "bytes": res.Bytes, "already_restored": res.AlreadyRestored})
	}
	_, err = fmt.Fprintln(s.Stdout, msg)
	return err
}
