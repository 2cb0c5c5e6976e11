package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/logplayer/logplayer/target/sqlstore/sqlbench"
)

func init() {
	register(&command{
		name:     "bench sink",
		summary:  "benchmark the PostgreSQL sink against a bare COPY loader (Markdown table)",
		synopsis: "--dsn DSN [--row-bytes 100,1024] [--batch-rows 1,10,100] [--duration 3s] [--producers 8] [--rate TXN/S]",
		about: `
For each row size and batch size: a bare loader (COPY, one transaction per
batch, no LogPlayer) and the sink (an in-process 3-node LogStore, a
LogPlayer and a sink target with the built-in mapping) write the same rows to
the database of --dsn, one after the other. Reports rows/s of both, the bare
commit p50, the append p50 and the end-to-end latency (append acknowledged to
the row visible to a query on another connection), and issue 25's goals.
A second table splits the end-to-end latency at each hop (ack to dispatch,
to the target receiving the batch, to the start of its apply, the SQL
transaction, to the row seen by the poller) beside a bare commit measured
while the sink runs. Tables sqlbench_* are created and dropped.`,
		examples: []string{
			"logplayer bench sink --dsn postgres://postgres@127.0.0.1:5432/bench",
			"logplayer bench sink --dsn postgres://postgres@127.0.0.1:5432/bench --row-bytes 1024 --batch-rows 100 --duration 5s",
		},
		required: []string{"dsn"},
		new:      func() runner { return &benchSinkCmd{} },
	})
}

type benchSinkCmd struct {
	dsn               string
	rowBytes, batches intList
	duration, warmup  time.Duration
	producers         int
	rate              float64
}

func (c *benchSinkCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.dsn, "dsn", "", "PostgreSQL connection string of the database written to (`DSN`)")
	fs.Var(&c.rowBytes, "row-bytes", "value sizes in bytes, comma-separated (default 100,1024)")
	fs.Var(&c.batches, "batch-rows", "rows per transaction, comma-separated (default 1,10,100)")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measurement time of each row")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "load before each row's measurement")
	fs.IntVar(&c.producers, "producers", 8, "concurrent appenders feeding the sink")
	fs.Float64Var(&c.rate, "rate", 0, "pace the appenders to this many transactions per second in all (0: closed loop)")
}

func (c *benchSinkCmd) run(ctx context.Context, s *sys) error {
	if c.duration <= 0 || c.producers < 1 {
		return usagef("--duration and --producers must be positive")
	}
	if c.rate < 0 {
		return usagef("--rate must not be negative")
	}
	t, err := sqlbench.Run(ctx, sqlbench.Config{DSN: c.dsn, RowBytes: c.rowBytes.ints, BatchRows: c.batches.ints,
		Duration: c.duration, Warmup: c.warmup, Producers: c.producers, Rate: c.rate})
	if err != nil {
		return err
	}
	fmt.Fprint(s.stdout, t.String())
	return nil
}
