package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// `logplayer target clone` (issue #29): seed a new target from a sibling.

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

func (c *targetCloneCmd) Run(ctx context.Context, s *cli.Sys) error {
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	from, to := types.TargetID(c.from), types.TargetID(c.to)
	res, err := target.Clone(ctx, target.CloneConfig{From: from, To: to, ToAddress: c.toAddr.Addr, Registry: cl, Dial: c.conn.DialOther, Logger: s.Log})
	if name := target.CloneRefusal(err); name != "" {
		return fmt.Errorf("refused: %s: %w", name, err)
	}
	if err != nil {
		return c.conn.Describe(ctx, "target clone", err)
	}
	msg := res.Message(from, to)
	if c.asJSON {
		return writeJSONLine(s.Stdout, map[string]any{"ok": true, "message": msg, "applied_lsn": uint64(res.State.AppliedLSN),
			"first_lsn": uint64(res.FirstLSN), "bytes": res.Bytes, "already_restored": res.AlreadyRestored})
	}
	_, err = fmt.Fprintln(s.Stdout, msg)
	return err
}
