package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/types"
)

// `logplayer target reset`: the operator's explicit reset of a stopped
// events target after a restore or a recovery of the LogStore (issue #31
// item 6; README Runbook, "Targets after a restore or a recovery").

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

func (*optUint64) NoEnv() {}

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
func (*confirmFlag) NoEnv()             {}
func (c *confirmFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	c.on = v
	return err
}

func (c *targetResetCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.dataDir, "data-dir", "", "the stopped events target's `directory` (its --data-dir)")
	fs.Var(&c.lsn, "lsn", "move the applied LSN back to this `lsn`, deleting the events above it (default: keep)")
	fs.Var(&c.epoch, "epoch", "move the stored LogPlayer epoch back to this `epoch` (default: keep)")
	fs.Var(&c.confirm, "confirm", "write the reset (without it: print what it would do and change nothing)")
}

func (c *targetResetCmd) Run(_ context.Context, s *cli.Sys) error {
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
	_ = res.Write(s.Stdout) // like the Fprintf below: a failed write to stdout is not a failed reset
	path := demo.EventLogPath(c.dataDir)
	if r.DryRun {
		return fmt.Errorf("nothing written to %s: add --confirm to reset it", path)
	}
	fmt.Fprintf(s.Stdout, "reset %s; start the target: the next LogPlayer's Hello gives it the log's identity\n", path)
	return nil
}
