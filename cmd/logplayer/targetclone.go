package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// `logplayer target clone` (issue #29): seed a new target from a sibling.

func init() {
	register(&command{
		name:     "target clone",
		summary:  "seed a new target from a sibling's snapshot, then register it",
		synopsis: "--from ID --to ID [--to-addr HOST:PORT] [--addr LIST] [--json]",
		about: `
Bootstraps a target the log can no longer replay from the start (retention
trimmed it: the LogPlayer refuses it with BELOW_RETENTION). Both targets'
addresses come from the target registry (logplayer target add/describe); a --to
not registered yet needs --to-addr and gets --from's topics.

The sibling (--from) must hold the same topics and be current enough: its
snapshot's applied LSN must still be in the log (applied + 1 >= the log's first
retained LSN), and its data from the LogStore's log. The new target must be
empty and its store able to restore (the shard and the SQL sinks are). The
snapshot streams from --from's Snapshot RPC to --to's Restore RPC; the new
target stages it and switches atomically at its end. Then --to is (re-)
registered and the LogPlayer delivers the tail from the snapshot's LSN.

A clone interrupted before the end registered nothing new and restored nothing:
run it again. Refusals name the reason: SIBLING_BEHIND, TOPICS_DIFFER,
OTHER_LOG, NOT_EMPTY, UNKNOWN_SIBLING, INVALID.`,
		examples: []string{
			"logplayer target clone --from shard-0a --to shard-0b",
			"logplayer target clone --from pg-main --to pg-replica --to-addr 10.0.0.7:7510",
		},
		required: []string{"from", "to"},
		new:      func() runner { return &targetCloneCmd{} },
	})
}

type targetCloneCmd struct {
	conn     clientFlags
	from, to string
	toAddr   addrValue
	asJSON   bool
}

func (c *targetCloneCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object instead of text")
	fs.StringVar(&c.from, "from", "", "the sibling target `id` snapshotted")
	fs.StringVar(&c.to, "to", "", "the new target `id` seeded")
	fs.Var(&c.toAddr, "to-addr", "the new target's Deliver `address` when it is not registered yet")
}

func (c *targetCloneCmd) run(ctx context.Context, s *sys) error {
	cl, err := c.conn.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	from, to := types.TargetID(c.from), types.TargetID(c.to)
	res, err := target.Clone(ctx, target.CloneConfig{From: from, To: to, ToAddress: c.toAddr.addr, Registry: cl, Dial: c.conn.dialOther, Logger: s.log})
	if name := target.CloneRefusal(err); name != "" {
		return fmt.Errorf("refused: %s: %w", name, err)
	}
	if err != nil {
		return c.conn.describe(ctx, "target clone", err)
	}
	msg := res.Message(from, to)
	if c.asJSON {
		return writeJSONLine(s.stdout, map[string]any{"ok": true, "message": msg, "applied_lsn": uint64(res.State.AppliedLSN),
			"first_lsn": uint64(res.FirstLSN), "bytes": res.Bytes, "already_restored": res.AlreadyRestored})
	}
	_, err = fmt.Fprintln(s.stdout, msg)
	return err
}
