package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/logplayer/logplayer/demo"
)

func init() {
	register(&command{
		name:     "demo",
		summary:  "drive the WAL-apply demo workload against a running cluster and check the shards",
		synopsis: "--shard shard-0=HOST:PORT [--shard ...] [--duration D] [--addr LIST] [flags]",
		about: `
The workload of 'logplayer dev --demo', against a cluster running elsewhere
(processes, containers): idempotent producers append transactions that write
mutations to 2 or 3 of the shards shard-0..shard-N-1 (topics of the same
names) plus an event to orders and inventory. Then it waits for the shards to
catch up, reads the log back and compares every shard's state with the model
built from it, prints the summary table and, last, one JSON line. Exit code 1
if anything is missing, duplicated or different.

Without access to the shards' stores, delivery is audited from each shard's
applied LSN and its final state (the table says "position+state").`,
		examples: []string{
			"logplayer demo --addr 127.0.0.1:7400 --shard shard-0=127.0.0.1:7430 --shard shard-1=127.0.0.1:7431 --duration 10s",
		},
		required: []string{"shard"},
		new:      func() runner { return &demoCmd{} },
	})
}

type demoCmd struct {
	conn     clientFlags
	shards   shardAddrs
	duration time.Duration
	clients  int
	seed     uint64
	catchUp  time.Duration
}

func (c *demoCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.Var(&c.shards, "shard", "a shard target `shard-N=HOST:PORT`; repeat for shard-0 .. shard-N-1")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to append")
	fs.IntVar(&c.clients, "clients", demo.DefaultClients, "concurrent producers")
	fs.Uint64Var(&c.seed, "seed", 0, "`seed` of the randomness (default: from the clock)")
	fs.DurationVar(&c.catchUp, "catch-up", 60*time.Second, "how long to wait for delivery to catch up before checking")
}

func (c *demoCmd) run(ctx context.Context, s *sys) error {
	if c.duration <= 0 || c.clients < 1 || c.catchUp <= 0 {
		return usagef("--duration, --clients and --catch-up must be positive")
	}
	if err := demo.CheckShardAddrs(c.shards.addrs); err != nil {
		return usagef("%v", err)
	}
	cl, err := c.conn.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := demo.SessionAt(ctx, demo.SessionConfig{
		Cluster: cl, Duration: c.duration, Clients: c.clients, Seed: c.seed,
		CatchUp: c.catchUp, StatusTimeout: c.conn.timeout, Out: s.stderr, Logger: s.log,
	}, c.shards.addrs, c.conn.dialOther)
	return writeDemoReport(s, rep, err)
}

// writeDemoReport prints a demo session's report (the JSON line last);
// a failed check is demo.ErrCheckFailed (exit 1).
func writeDemoReport(s *sys, rep *demo.Report, err error) error {
	if err != nil {
		return err
	}
	return rep.WriteChecked(s.stdout)
}

// shardAddrs is the repeatable --shard shard-N=HOST:PORT.
type shardAddrs struct{ addrs map[string]string }

func (v *shardAddrs) String() string { return "" }
func (v *shardAddrs) Set(s string) error {
	id, addr, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(id, "shard-") {
		return fmt.Errorf("want shard-N=HOST:PORT")
	}
	if err := checkAddr(addr); err != nil {
		return err
	}
	if v.addrs == nil {
		v.addrs = map[string]string{}
	}
	v.addrs[id] = addr
	return nil
}
func (*shardAddrs) repeatable() {}
