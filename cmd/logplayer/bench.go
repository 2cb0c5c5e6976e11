package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	lpbench "github.com/logplayer/logplayer/logplayer/bench"
	lsbench "github.com/logplayer/logplayer/logstore/bench"
)

func init() {
	register(&command{
		name:     "bench store",
		summary:  "benchmark LogStore Append against bare hashicorp/raft (Markdown table)",
		synopsis: "[--clients 1,10,64,256] [--duration 3s] [flags]",
		about: `
Starts 3 LogStore nodes in this process (TCP on 127.0.0.1, fsync on) and, for
each --clients level, that many clients each doing one Append at a time (a
transaction of --topics topics x one --slice-bytes message) for --duration
after --warmup; right after each level, the same load on bare
hashicorp/raft Apply (raft-boltdb, TCP transport, no-op FSM) as the
reference, so both see the same machine. Prints one Markdown table, a line
per client count: tx/s and p50/p99/p99.9 of both systems, the LogStore/bare
ratios marked against the DESIGN.md goals, and transactions per gRPC call
and per Raft entry.

The clients share one client.Client, which sends Appends that run at the
same time in one AppendBatch call (each still its own transaction);
--plain-appends sends every transaction in an Append call of its own.

scripts/bench.sh runs this and 'bench player' and writes docs/BENCHMARKS.md.`,
		examples: []string{
			"logplayer bench store",
			"logplayer bench store --clients 1,10 --duration 5s --skip-raft",
			"logplayer bench store --clients 64 --plain-appends",
		},
		new: func() runner { return &benchStoreCmd{} },
	})
	register(&command{
		name:     "bench player",
		summary:  "benchmark LogPlayer delay and end-to-end apply delay (Markdown table)",
		synopsis: "[--targets 2,5,10,20] [--txn-kb 1,10] [--duration 3s] [flags]",
		about: `
The LogPlayer paper's Figures 9 and 10: for each number of targets (reference
bbolt shards, fsync on) and transaction size (KB of 1 KB key-values spread
over random shards), --producers appenders in a closed loop for --duration.
Reports the LogPlayer delay (dispatch to the target receiving the batch) and
the apply delay (Append call to durable apply at the target): average, p50,
p99. Uses an in-process 3-node LogStore unless --store names a running one.

With --processes the LogStore and each target run in child processes of this
binary (started with the internal flag --child), so their CPU, garbage
collection and fsyncs do not share the LogPlayer's Go runtime (the paper runs
them on separate machines). On a 2-core machine that is not faster: the
LogStore and 20 targets then wake across processes and compete for the same
two cores. Every delay is measured on this machine's wall clock.`,
		examples: []string{
			"logplayer bench player",
			"logplayer bench player --targets 20 --txn-kb 1 --duration 10s",
			"logplayer bench player --processes --targets 20",
		},
		new: func() runner { return &benchPlayerCmd{} },
	})
}

type benchStoreCmd struct {
	clients          intList
	duration, warmup time.Duration
	topics           int
	sliceBytes       int
	skipRaft         bool
	plainAppends     bool
	dataDir          string
}

func (c *benchStoreCmd) flags(fs *flag.FlagSet) {
	c.clients = intList{ints: []int{1, 10, 64, 256}}
	fs.Var(&c.clients, "clients", "concurrency `levels`, comma-separated")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measurement time of each row")
	fs.DurationVar(&c.warmup, "warmup", 300*time.Millisecond, "load before each row's measurement")
	fs.IntVar(&c.topics, "topics", 2, "topics per transaction")
	fs.IntVar(&c.sliceBytes, "slice-bytes", 256, "bytes of each topic's one message")
	fs.BoolVar(&c.skipRaft, "skip-raft", false, "leave out the bare hashicorp/raft reference rows")
	fs.BoolVar(&c.plainAppends, "plain-appends", false, "one Append call per transaction (no coalescing of concurrent Appends into AppendBatch calls)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` for the nodes' data (default: a temporary one, removed after)")
}

func (c *benchStoreCmd) run(ctx context.Context, s *sys) error {
	if c.duration <= 0 || c.warmup < 0 || c.topics < 1 || c.sliceBytes < 1 {
		return usagef("--duration, --topics and --slice-bytes must be positive")
	}
	t, err := lsbench.Run(ctx, lsbench.Config{
		Clients: c.clients.ints, Duration: c.duration, Warmup: c.warmup, Topics: c.topics,
		SliceBytes: c.sliceBytes, Dir: c.dataDir, SkipBareRaft: c.skipRaft, PlainAppends: c.plainAppends,
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(s.stdout, t.String())
	return err
}

type benchPlayerCmd struct {
	targets, txnKB   intList
	duration, warmup time.Duration
	producers        int
	store            addrList
	dataDir          string
	processes        bool
	childProcs       int
	child            string
	memoryTargets    bool
}

func (c *benchPlayerCmd) flags(fs *flag.FlagSet) {
	c.targets = intList{ints: []int{2, 5, 10, 20}}
	c.txnKB = intList{ints: []int{1, 10}}
	fs.Var(&c.targets, "targets", "numbers of `targets`, comma-separated")
	fs.Var(&c.txnKB, "txn-kb", "transaction `sizes` in KB (1 KB key-values), comma-separated")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measurement time of each row")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "load before each row's measurement")
	fs.IntVar(&c.producers, "producers", 1, "concurrent appenders (1: serial load, latency without queueing)")
	fs.Var(&c.store, "store", "LogStore API `addresses` of a running cluster (default: 3 nodes in this process)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` for the data (default: a temporary one, removed after)")
	fs.BoolVar(&c.memoryTargets, "memory-targets", false, "targets keep only their applied position in memory (no bbolt, no fsync): the LogPlayer delay without the targets' disk and CPU")
	fs.BoolVar(&c.processes, "processes", false, "run the LogStore and each target in a child process instead of inside this one")
	fs.IntVar(&c.childProcs, "child-gomaxprocs", 1, "with --processes: GOMAXPROCS of each target process (0: Go's default, one per core)")
	fs.StringVar(&c.child, "child", "", "internal, set by --processes: run as its child process with these `arguments` (a JSON list)")
}

func (c *benchPlayerCmd) run(ctx context.Context, s *sys) error {
	if c.child != "" {
		var args []string
		if err := json.Unmarshal([]byte(c.child), &args); err != nil {
			return usagef("--child: %v", err)
		}
		return lpbench.ServeChild(ctx, args, s.stdin, s.stdout, nil) // quiet, like the in-process components
	}
	if c.duration <= 0 || c.warmup < 0 || c.producers < 1 || c.childProcs < 0 {
		return usagef("--duration and --producers must be positive, --child-gomaxprocs not negative")
	}
	cfg := lpbench.Config{
		Targets: c.targets.ints, TxnKB: c.txnKB.ints, Duration: c.duration, Warmup: c.warmup,
		Producers: c.producers, LogStore: c.store.items, Dir: c.dataDir, MemoryTargets: c.memoryTargets,
	}
	if c.processes {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Spawn = func(args ...string) *exec.Cmd {
			spec, err := json.Marshal(args)
			if err != nil {
				panic(err) // a []string always marshals
			}
			cmd := exec.Command(exe, "bench", "player", "--child", string(spec))
			cmd.Stderr = s.stderr
			if c.childProcs > 0 && slices.Contains(args, "target") {
				cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", c.childProcs))
			}
			return cmd
		}
	}
	t, err := lpbench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(s.stdout, t.String())
	return err
}
