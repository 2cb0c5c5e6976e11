package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/logplayer/logplayer/internal/cli"
	lpbench "github.com/logplayer/logplayer/logplayer/bench"
	lsbench "github.com/logplayer/logplayer/logstore/bench"
)

type benchStoreCmd struct {
	clients          cli.IntList
	systems          string
	duration, warmup time.Duration
	topics           int
	sliceBytes       int
	plainAppends     bool
	dataDir          string
	jsonOut          string
	cpuProfile       string
	rowProfiles      string
	inProcess        bool
	tls              bool
	// Tuning experiments: LogStore node settings (0: the node default).
	maxInflight, pipelineMin, maxAppendEntries int
	holdRatio                                  float64
}

func (c *benchStoreCmd) Flags(fs *flag.FlagSet) {
	c.clients = cli.IntList{Ints: []int{1, 10, 64, 256}}
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
	fs.StringVar(&c.rowProfiles, "row-profiles", "", "write each row's CPU profile into this `directory`: a server process's as <clients>-<system>-server.pprof, an in-process row's as <clients>-<system>.pprof (servers' goroutines labelled bench=server)")
	fs.BoolVar(&c.inProcess, "in-process", false, "run every server in this process and take server CPU from CPU profile labels (the method before server processes)")
	fs.BoolVar(&c.tls, "tls", false, "run every level twice: plaintext, then mutual TLS with authorization (a table each)")
	fs.IntVar(&c.maxInflight, "max-inflight-entries", 0, "tuning: the LogStore nodes' MaxInflightEntries (0: the default)")
	fs.IntVar(&c.pipelineMin, "pipeline-min-txns", 0, "tuning: the LogStore nodes' PipelineMinTxns (0: the default)")
	fs.IntVar(&c.maxAppendEntries, "max-append-entries", 0, "tuning: the LogStore nodes' Raft MaxAppendEntries (0: the default)")
	fs.Float64Var(&c.holdRatio, "hold-return-ratio", 0, "tuning: the LogStore nodes' HoldReturnRatio (0: the default, 1)")
}

func (c *benchStoreCmd) Run(ctx context.Context, s *cli.Sys) error {
	if served, err := lsbench.ServeChild(ctx, s.Stdin, s.Stdout); served { // a server process of a run
		return err
	}
	if c.duration <= 0 || c.warmup < 0 || c.topics < 1 || c.sliceBytes < 1 {
		return cli.Usagef("--duration, --topics and --slice-bytes must be positive")
	}
	if c.maxInflight < 0 || c.pipelineMin < 0 || c.maxAppendEntries < 0 || !(c.holdRatio >= 0) {
		return cli.Usagef("--max-inflight-entries, --pipeline-min-txns, --max-append-entries and --hold-return-ratio must not be negative")
	}
	systems, err := lsbench.ParseSystems(c.systems)
	if err != nil {
		return cli.Usagef("--systems: %v", err)
	}
	var serverCmd []string
	if !c.inProcess {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		serverCmd = []string{exe, "bench", "store"}
	}
	return lsbench.RunReport(ctx, s.Stdout, s.Log, lsbench.Config{
		Clients: c.clients.Ints, Systems: systems, Duration: c.duration, Warmup: c.warmup, Topics: c.topics,
		SliceBytes: c.sliceBytes, Dir: c.dataDir, PlainAppends: c.plainAppends, RowProfileDir: c.rowProfiles,
		Tuning: lsbench.Tuning{MaxInflightEntries: c.maxInflight, PipelineMinTxns: c.pipelineMin,
			MaxAppendEntries: c.maxAppendEntries, HoldReturnRatio: c.holdRatio},
		ServerCommand: serverCmd, ServerStderr: s.Stderr,
	}, lsbench.ReportOptions{TLS: c.tls, JSONFile: c.jsonOut, CPUProfile: c.cpuProfile})
}

type benchPlayerCmd struct {
	targets, txnKB   cli.IntList
	duration, warmup time.Duration
	producers        int
	store            cli.AddrList
	dataDir          string
	processes        bool
	childProcs       int
	child            string
	memoryTargets    bool
	tls              bool
	group            int
	failoverProfile  string
}

func (c *benchPlayerCmd) Flags(fs *flag.FlagSet) {
	c.targets = cli.IntList{Ints: []int{2, 5, 10, 20}}
	c.txnKB = cli.IntList{Ints: []int{1, 10}}
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

func (c *benchPlayerCmd) Run(ctx context.Context, s *cli.Sys) error {
	if c.child != "" {
		args, err := lpbench.ParseChildSpec(c.child)
		if err != nil {
			return cli.Usagef("--child: %v", err)
		}
		return lpbench.ServeChild(ctx, args, s.Stdin, s.Stdout, nil) // quiet, like the in-process components
	}
	if c.duration <= 0 || c.warmup < 0 || c.producers < 1 || c.childProcs < 0 {
		return cli.Usagef("--duration and --producers must be positive, --child-gomaxprocs not negative")
	}
	cfg := lpbench.Config{
		Targets: c.targets.Ints, TxnKB: c.txnKB.Ints, Duration: c.duration, Warmup: c.warmup,
		Producers: c.producers, LogStore: c.store.Items, Dir: c.dataDir, MemoryTargets: c.memoryTargets, Group: c.group,
		FailoverProfile: c.failoverProfile,
	}
	if c.group < 0 || c.group > 1 && c.processes {
		return cli.Usagef("--group must not be negative and runs in-process only (not with --processes)")
	}
	if c.processes {
		var err error
		if cfg.Spawn, err = lpbench.SpawnSelfExecutable([]string{"bench", "player", "--child"}, s.Stderr, c.childProcs); err != nil {
			return err
		}
	}
	if c.tls && (c.processes || len(c.store.Items) > 0) {
		return cli.Usagef("--tls runs the in-process components only (not with --processes or --store)")
	}
	return lpbench.RunReport(ctx, s.Stdout, s.Log, cfg, c.tls)
}
