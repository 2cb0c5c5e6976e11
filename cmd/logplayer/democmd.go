package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/cli"
)

type demoCmd struct {
	conn     cli.ClientFlags
	shards   shardAddrs
	duration time.Duration
	clients  int
	seed     uint64
	catchUp  time.Duration
}

func (c *demoCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.Var(&c.shards, "shard", "a shard target `shard-N=HOST:PORT`; repeat for shard-0 .. shard-N-1")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to append")
	fs.IntVar(&c.clients, "clients", demo.DefaultClients, "concurrent producers")
	fs.Uint64Var(&c.seed, "seed", 0, "`seed` of the randomness (default: from the clock)")
	fs.DurationVar(&c.catchUp, "catch-up", 60*time.Second, "how long to wait for delivery to catch up before checking")
}

func (c *demoCmd) Run(ctx context.Context, s *cli.Sys) error {
	if c.duration <= 0 || c.clients < 1 || c.catchUp <= 0 {
		return cli.Usagef("--duration, --clients and --catch-up must be positive")
	}
	if err := demo.CheckShardAddrs(c.shards.addrs); err != nil {
		return cli.Usagef("%v", err)
	}
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := demo.SessionAt(ctx, demo.SessionConfig{
		Cluster: cl, Duration: c.duration, Clients: c.clients, Seed: c.seed,
		CatchUp: c.catchUp, StatusTimeout: c.conn.Timeout, Out: s.Stderr, Logger: s.Log,
	}, c.shards.addrs, c.conn.DialOther)
	return writeDemoReport(s, rep, err)
}

// writeDemoReport prints a demo session's report (the JSON line last);
// a failed check is demo.ErrCheckFailed (exit 1).
func writeDemoReport(s *cli.Sys, rep *demo.Report, err error) error {
	if err != nil {
		return err
	}
	return rep.WriteChecked(s.Stdout)
}

// shardAddrs is the repeatable --shard shard-N=HOST:PORT.
type shardAddrs struct{ addrs map[string]string }

func (v *shardAddrs) String() string { return "" }
func (v *shardAddrs) Set(s string) error {
	id, addr, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(id, "shard-") {
		return fmt.Errorf("want shard-N=HOST:PORT")
	}
	if err := cli.CheckAddr(addr); err != nil {
		return err
	}
	if v.addrs == nil {
		v.addrs = map[string]string{}
	}
	v.addrs[id] = addr
	return nil
}
func (*shardAddrs) Repeatable() {}
