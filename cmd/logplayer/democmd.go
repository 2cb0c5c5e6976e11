package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/cli"
)

func init() {
	app.Register(&cli.Command{
		Name:     "demo",
		Required: []string{"shard"},
		New:      func() cli.Runner { return &demoCmd{} },
	})
}

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
	if err := c.shards.check(); err != nil {
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
// a failed check is errDemoFailed (exit 1).
func writeDemoReport(s *cli.Sys, rep *demo.Report, err error) error {
	if err != nil {
		return err
	}
	if err := rep.Write(s.Stdout); err != nil {
		return err
	}
	if !rep.OK {
		return errDemoFailed
	}
	return nil
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

// check requires shard-0 .. shard-N-1 with N >= 2 (the workload's topics).
func (v *shardAddrs) check() error {
	if len(v.addrs) < 2 {
		return errors.New("give at least 2 shards (--shard shard-0=... --shard shard-1=...)")
	}
	for i := range len(v.addrs) {
		if _, ok := v.addrs[demo.ShardTopic(i)]; !ok {
			return fmt.Errorf("shards must be named shard-0 .. shard-%d: %s is missing", len(v.addrs)-1, demo.ShardTopic(i))
		}
	}
	return nil
}

// errDemoFailed is returned when the demo's check found a problem (exit 1).
var errDemoFailed = errors.New("demo check failed: something is missing or duplicated (see the table above)")
