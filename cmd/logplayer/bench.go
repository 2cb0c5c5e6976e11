package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"time"

	lpbench "github.com/logplayer/logplayer/logplayer/bench"
	"github.com/logplayer/logplayer/logstore"
	lsbench "github.com/logplayer/logplayer/logstore/bench"
)

func init() {
	register(&command{
		name:     "bench store",
		summary:  "benchmark LogStore Append on raft-wal and raft-boltdb against bare hashicorp/raft (Markdown table)",
		synopsis: "[--clients 1,10,64,256] [--systems all] [--duration 3s] [--json FILE] [flags]",
		about: `
Starts, in this process, 3 LogStore nodes on each Raft log backend (raft-wal
and raft-boltdb; TCP on 127.0.0.1, fsync on) and 3 bare hashicorp/raft
nodes on each (TCP transport, no-op FSM, raft.DefaultConfig). For each
--clients level it runs every system of --systems in turn, that many
clients each doing one operation at a time for --duration after --warmup:
  logstore-wal, logstore-boltdb    Append (a transaction of --topics topics
                                   x one --slice-bytes message), all clients
                                   sharing one client.Client, which sends
                                   concurrent Appends in one AppendBatch call
  logstore-wal-conns, ...-boltdb-conns
                                   the same with one client.Client (one
                                   connection) per client: independent
                                   producers, one transaction per call
  logstore-wal-http                the same as JSON over HTTP: each client
                                   POSTs /v1/append with a JSON body to the
                                   leader's HTTP API, on connections of its
                                   own (beside logstore-wal-conns: the cost
                                   of JSON over HTTP)
  raft-wal, raft-boltdb            raft.Apply of a payload of the same size
  grpc-conns                       no LogStore: a no-op unary gRPC call
                                   carrying the same bytes, one connection
                                   per client (the floor under -conns)
A row counts the operations that complete inside its window. Prints one
Markdown table, a line per level and system (tx/s, p50/p99/p99.9,
transactions per gRPC call and per Raft entry), then issue 11's goal ratios
marked met or missed, and logstore-wal-http's p50 and tx/s beside
logstore-wal-conns'. --json also writes the rows as JSON, which
'logplayer-bench chart' (cmd/logplayer-bench) draws.

--systems takes names or prefixes ("logstore", "raft", "logstore-wal"), so
a quick run can measure a subset. --plain-appends sends every transaction
in an Append call of its own. --cpu-profile writes a pprof CPU profile of
the whole run (all nodes and clients share this process).

scripts/bench.sh runs this and 'bench player' and writes docs/BENCHMARKS.md.`,
		examples: []string{
			"logplayer bench store",
			"logplayer bench store --clients 1,10 --duration 5s --systems logstore-wal,raft",
			"logplayer bench store --clients 64 --systems logstore-wal --json store.json --cpu-profile cpu.pprof",
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
two cores. Every delay is measured on this machine's wall clock.

A second table gives each row's cost per target (issue 13): heap in use
after GC and RSS, as deltas from before the LogPlayer started, over the
targets, idle and at the end of the load; the LogPlayer's CPU per
transaction (a CPU profile of the window, counting the goroutines the
LogPlayer started, by pprof label); player p50 over bare p50. With
--group N, N LogPlayers in this process join one group (the first
registers the targets in the LogStore, the others join in turn and take
their share); after the measurement the last is killed under load (its
LogStore connections closed, no LeaveGroup) and the row times how long
until the others hold its targets (state N) and have delivered each beyond
the LogStore head at the kill, beside the group lease.`,
		examples: []string{
			"logplayer bench player",
			"logplayer bench player --targets 20 --txn-kb 1 --duration 10s",
			"logplayer bench player --processes --targets 20",
			"logplayer bench player --targets 100,500 --txn-kb 1 --memory-targets --group 2",
		},
		new: func() runner { return &benchPlayerCmd{} },
	})
}

type benchStoreCmd struct {
	clients          intList
	systems          string
	duration, warmup time.Duration
	topics           int
	sliceBytes       int
	plainAppends     bool
	dataDir          string
	jsonOut          string
	cpuProfile       string
	rowProfiles      string
	tls              bool
	// Tuning experiments: LogStore node settings (0: the node default).
	maxInflight, pipelineMin, maxAppendEntries int
}

func (c *benchStoreCmd) flags(fs *flag.FlagSet) {
	c.clients = intList{ints: []int{1, 10, 64, 256}}
	fs.Var(&c.clients, "clients", "concurrency `levels`, comma-separated")
	fs.StringVar(&c.systems, "systems", "all", "`systems` to measure, comma-separated names or prefixes: "+lsbench.SystemNames())
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measurement time of each row")
	fs.DurationVar(&c.warmup, "warmup", 300*time.Millisecond, "load before each row's measurement")
	fs.IntVar(&c.topics, "topics", 2, "topics per transaction")
	fs.IntVar(&c.sliceBytes, "slice-bytes", 256, "bytes of each topic's one message")
	fs.BoolVar(&c.plainAppends, "plain-appends", false, "one Append call per transaction (no coalescing of concurrent Appends into AppendBatch calls)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` for the nodes' data (default: a temporary one, removed after)")
	fs.StringVar(&c.jsonOut, "json", "", "also write the rows as JSON to this `file` (for 'logplayer-bench chart')")
	fs.StringVar(&c.cpuProfile, "cpu-profile", "", "write a pprof CPU profile of the run to this `file`")
	fs.StringVar(&c.rowProfiles, "row-profiles", "", "write each row's CPU profile (servers' goroutines labelled bench=server) into this `directory` as <clients>-<system>.pprof")
	fs.BoolVar(&c.tls, "tls", false, "run every level twice: plaintext, then mutual TLS with authorization (a table each)")
	fs.IntVar(&c.maxInflight, "max-inflight-entries", 0, "tuning: the LogStore nodes' MaxInflightEntries (0: the default)")
	fs.IntVar(&c.pipelineMin, "pipeline-min-txns", 0, "tuning: the LogStore nodes' PipelineMinTxns (0: the default)")
	fs.IntVar(&c.maxAppendEntries, "max-append-entries", 0, "tuning: the LogStore nodes' Raft MaxAppendEntries (0: the default)")
}

func (c *benchStoreCmd) run(ctx context.Context, s *sys) error {
	if c.duration <= 0 || c.warmup < 0 || c.topics < 1 || c.sliceBytes < 1 {
		return usagef("--duration, --topics and --slice-bytes must be positive")
	}
	if c.maxInflight < 0 || c.pipelineMin < 0 || c.maxAppendEntries < 0 {
		return usagef("--max-inflight-entries, --pipeline-min-txns and --max-append-entries must not be negative")
	}
	systems, err := lsbench.ParseSystems(c.systems)
	if err != nil {
		return usagef("--systems: %v", err)
	}
	return lsbench.RunReport(ctx, s.stdout, s.log, lsbench.Config{
		Clients: c.clients.ints, Systems: systems, Duration: c.duration, Warmup: c.warmup, Topics: c.topics,
		SliceBytes: c.sliceBytes, Dir: c.dataDir, PlainAppends: c.plainAppends, RowProfileDir: c.rowProfiles,
		Node: func(nc *logstore.Config) {
			nc.MaxInflightEntries, nc.PipelineMinTxns, nc.MaxAppendEntries = c.maxInflight, c.pipelineMin, c.maxAppendEntries
		},
	}, lsbench.ReportOptions{TLS: c.tls, JSONFile: c.jsonOut, CPUProfile: c.cpuProfile})
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
	tls              bool
	group            int
	failoverProfile  string
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
	fs.BoolVar(&c.tls, "tls", false, "run every row twice: plaintext, then mutual TLS with authorization (in-process only)")
	fs.IntVar(&c.group, "group", 0, "run this many LogPlayers as one group sharing the targets, then kill one under load and measure the failover (in-process only; 0 or 1: one LogPlayer, no group)")
	fs.StringVar(&c.failoverProfile, "failover-cpu-profile", "", "with --group: write a pprof CPU profile of the process during the failover to this `file`")
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
		Producers: c.producers, LogStore: c.store.items, Dir: c.dataDir, MemoryTargets: c.memoryTargets, Group: c.group,
		FailoverProfile: c.failoverProfile,
	}
	if c.group < 0 || c.group > 1 && c.processes {
		return usagef("--group must not be negative and runs in-process only (not with --processes)")
	}
	if c.processes {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Spawn = lpbench.SpawnSelf(exe, []string{"bench", "player", "--child"}, s.stderr, c.childProcs)
	}
	if c.tls && (c.processes || len(c.store.items) > 0) {
		return usagef("--tls runs the in-process components only (not with --processes or --store)")
	}
	return lpbench.RunReport(ctx, s.stdout, s.log, cfg, c.tls)
}
