package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/target/sqlstore/sqlbench"
)

type benchSinkCmd struct {
	dsn               string
	rowBytes, batches cli.IntList
	duration, warmup  time.Duration
	producers         int
	rate              float64
}

func (c *benchSinkCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.dsn, "dsn", "", "PostgreSQL connection string of the database written to (`DSN`)")
	fs.Var(&c.rowBytes, "row-bytes", "value sizes in bytes, comma-separated (default 100,1024)")
	fs.Var(&c.batches, "batch-rows", "rows per transaction, comma-separated (default 1,10,100)")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measurement time of each row")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "load before each row's measurement")
	fs.IntVar(&c.producers, "producers", 8, "concurrent appenders feeding the sink")
	fs.Float64Var(&c.rate, "rate", 0, "pace the appenders to this many transactions per second in all (0: closed loop)")
}

func (c *benchSinkCmd) Run(ctx context.Context, s *cli.Sys) error {
	if c.duration <= 0 || c.producers < 1 {
		return cli.Usagef("--duration and --producers must be positive")
	}
	if c.rate < 0 {
		return cli.Usagef("--rate must not be negative")
	}
	t, err := sqlbench.Run(ctx, sqlbench.Config{DSN: c.dsn, RowBytes: c.rowBytes.Ints, BatchRows: c.batches.Ints,
		Duration: c.duration, Warmup: c.warmup, Producers: c.producers, Rate: c.rate})
	if err != nil {
		return err
	}
	fmt.Fprint(s.Stdout, t.String())
	return nil
}
