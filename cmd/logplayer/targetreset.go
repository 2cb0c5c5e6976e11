package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/types"
)

// `logplayer target reset`: the operator's explicit reset of a stopped
// events target after a restore or a recovery of the LogStore (issue #31
// item 6; README Runbook, "Targets after a restore or a recovery").

func init() {
	register(&command{
		name:     "target reset",
		summary:  "reset a stopped events target's log identity, position or epoch (after a LogStore restore)",
		synopsis: "--data-dir DIR [--lsn N] [--epoch E] [--confirm]",
		about: `
Rewrites the state of a stopped events target (logplayer events --data-dir DIR)
so that it can be delivered from a restored or recovered LogStore, which it
otherwise refuses (OTHER_LOG) or which refuses it (LOG_BEHIND_TARGET):

  - always: the stored log identity is removed; the next LogPlayer's Hello
    gives the new one;
  - --lsn N: the applied LSN goes back to N (at most the applied LSN): the
    events above N are deleted and each topic's position is recomputed from
    the events kept. After a backup restore, N is the last LSN the restore
    printed ("restored ...: lsn A..B"): the events above it are of
    transactions the restored log does not have. --lsn 0 empties the target;
  - --epoch E: the highest LogPlayer epoch stored goes back to E (at most the
    stored one), for a target fenced by an epoch no LogPlayer can reach.

Without --confirm nothing is written: the command prints the state now and
what the reset would leave, and fails. The target must be stopped (its file is
locked while it runs). A shard's directory is refused: restart the shard once
with --adopt-log-identity, or re-seed it (empty its --data-dir).`,
		examples: []string{
			"logplayer target reset --data-dir data/events",
			"logplayer target reset --data-dir data/events --lsn 1200 --confirm",
		},
		required: []string{"data-dir"},
		new:      func() runner { return &targetResetCmd{} },
	})
}

type targetResetCmd struct {
	dataDir    string
	lsn, epoch optUint64
	confirm    confirmFlag
}

// optUint64 is a uint64 flag that remembers whether it was set; never read
// from the environment (per-invocation data).
type optUint64 struct {
	v   uint64
	set bool
}

func (o *optUint64) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatUint(o.v, 10)
}

func (*optUint64) noEnv() {}

func (o *optUint64) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want a number from 0 to 18446744073709551615")
	}
	o.v, o.set = v, true
	return nil
}

// confirmFlag is --confirm: a bool flag never read from the environment,
// so that no exported variable rewrites a target.
type confirmFlag struct{ on bool }

func (c *confirmFlag) String() string   { return strconv.FormatBool(c.on) }
func (c *confirmFlag) IsBoolFlag() bool { return true }
func (*confirmFlag) noEnv()             {}
func (c *confirmFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	c.on = v
	return err
}

func (c *targetResetCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.dataDir, "data-dir", "", "the stopped events target's `directory` (its --data-dir)")
	fs.Var(&c.lsn, "lsn", "move the applied LSN back to this `lsn`, deleting the events above it (default: keep)")
	fs.Var(&c.epoch, "epoch", "move the stored LogPlayer epoch back to this `epoch` (default: keep)")
	fs.Var(&c.confirm, "confirm", "write the reset (without it: print what it would do and change nothing)")
}

func (c *targetResetCmd) run(_ context.Context, s *sys) error {
	r := demo.EventLogReset{DryRun: !c.confirm.on}
	if c.lsn.set {
		lsn := types.LSN(c.lsn.v)
		r.LSN = &lsn
	}
	if c.epoch.set {
		epoch := types.Epoch(c.epoch.v)
		r.Epoch = &epoch
	}
	res, err := demo.ResetEventLogDir(c.dataDir, r)
	if err != nil {
		return err
	}
	_ = res.Write(s.stdout) // as fmt.Fprintf: the outcome is the reset's
	path := demo.EventLogPath(c.dataDir)
	if r.DryRun {
		return fmt.Errorf("nothing written to %s: add --confirm to reset it", path)
	}
	fmt.Fprintf(s.stdout, "reset %s; start the target: the next LogPlayer's Hello gives it the log's identity\n", path)
	return nil
}
