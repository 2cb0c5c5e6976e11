package main

// `logplayer dev`: the whole system in one process on 127.0.0.1. This
// file parses the flags and calls package devcluster, which starts and
// stops the cluster.
//
// Goroutines (besides each library's own, see their package docs and
// devcluster's): with --demo, the workload's clients and progress reporter
// (package demo) and one demo.WatchApplied per shard.

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/devcluster"
)

func init() {
	register(&command{
		name:     "dev",
		summary:  "run everything in one process: 3 LogStore nodes, a LogPlayer, 3 shards (and a demo)",
		synopsis: "[--demo DURATION] [--data-dir DIR] [--port-base PORT] [flags]",
		about: `
Starts, in this process and on 127.0.0.1 only, a 3-node LogStore, a LogPlayer
and the targets shard-0, shard-1, shard-2 (reference bbolt shards, shard-N
subscribed to topic shard-N) plus "events" (an in-memory target subscribed to
orders and inventory). Prints the addresses, then serves until interrupted
(SIGINT or SIGTERM: graceful shutdown). Data lives in a temporary directory,
removed at exit, unless --data-dir is given: a later dev on the same
directory resumes its log and shards, with the LogStore nodes on the
addresses recorded there (dev-stores.json) since Raft's configuration names
them.

Ports: from --port-base B: LogStore APIs B..B+2, the same APIs as JSON over
HTTP B+5..B+7 (Connect, gRPC-Web and REST /v1/...), Raft B+10..B+12, LogPlayer
admin B+20, shards B+30..B+32, events B+33, metrics B+40. With the default base, busy ports make
dev fall back to random ports; --port-base 0 always picks random ports.

--demo DURATION also drives the WAL-apply workload for that long: each
transaction writes mutations to 2 or 3 random shards plus an event to orders
and to inventory, from --demo-clients idempotent producers. A progress line
goes to stderr once a second. Then it waits for delivery to catch up, checks
every shard's state against the model built from the log read back from the
LogStore, counts per apply what the events target received, prints a summary
table and, as the last line of stdout, one JSON object (committed, delivered,
duplicates, missing, latencies, ok). The exit code is 1 if anything is missing
or duplicated.`,
		examples: []string{
			"logplayer dev                          # serve until Ctrl-C; try append/tail/status in another terminal",
			"logplayer dev --demo 30s               # the demo workload and its exactly-once check",
			"logplayer dev --demo 10s --port-base 0 --demo-clients 16 | tail -n 1",
			"logplayer dev --data-dir ./devdata     # keep the data; a second run resumes it",
		},
		quietLogs: true,
		new:       func() runner { return &devCmd{} },
	})
}

type devCmd struct {
	dataDir     string
	portBase    portBaseValue
	metrics     bool
	demo        time.Duration
	demoClients int
	seed        uint64
	catchUp     time.Duration
	insecure    bool
}

func (c *devCmd) flags(fs *flag.FlagSet) {
	c.portBase = portBaseValue{port: devcluster.DefaultPortBase}
	fs.StringVar(&c.dataDir, "data-dir", "", "keep the data in this `directory` (default: a temporary one, removed at exit)")
	fs.Var(&c.portBase, "port-base", "first `port` of the fixed layout; 0 for random ports")
	fs.BoolVar(&c.metrics, "metrics", true, "serve every component's Prometheus metrics on port base+40")
	fs.DurationVar(&c.demo, "demo", 0, "run the demo workload for this `duration`, check it and exit")
	fs.IntVar(&c.demoClients, "demo-clients", demo.DefaultClients, "concurrent producers of the demo")
	fs.Uint64Var(&c.seed, "seed", 0, "`seed` of the demo's randomness (default: from the clock)")
	fs.DurationVar(&c.catchUp, "catch-up", 60*time.Second, "how long the demo waits for delivery to catch up before checking")
	fs.BoolVar(&c.insecure, "insecure", false, "plaintext and open: no TLS, tokens or authorization (default: throwaway TLS material in the data directory)")
}

// portBaseValue is --port-base; set records an explicit choice.
type portBaseValue struct {
	port int
	set  bool
}

func (v *portBaseValue) String() string { return strconv.Itoa(v.port) }
func (v *portBaseValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n+devcluster.MetricsPort > 65535 {
		return fmt.Errorf("want 0 (random ports) or a port up to %d", 65535-devcluster.MetricsPort)
	}
	v.port, v.set = n, true
	return nil
}

func (c *devCmd) run(ctx context.Context, s *sys) error {
	if c.demo < 0 || c.demoClients < 1 || c.catchUp <= 0 {
		return usagef("--demo, --demo-clients and --catch-up must be positive")
	}
	d, err := startDev(ctx, s, c)
	if err != nil {
		return err
	}
	defer d.Stop()
	d.WriteBanner(s.stdout, c.demo > 0, envName("tls-ca"), envName("token-file"))
	if c.demo == 0 {
		<-ctx.Done()
		fmt.Fprintln(s.stderr, "logplayer dev: shutting down")
		return nil
	}
	rep, err := d.Demo(ctx, demo.SessionConfig{Duration: c.demo, CatchUp: c.catchUp, Clients: c.demoClients, Seed: c.seed, Out: s.stderr, Logger: s.log})
	return writeDemoReport(s, rep, err)
}

// devCluster is the running dev cluster (the name the tests use).
type devCluster = devcluster.Cluster

// startDev starts the dev cluster of c's flags (devcluster.Start).
func startDev(ctx context.Context, s *sys, c *devCmd) (*devCluster, error) {
	return devcluster.Start(ctx, devcluster.Config{Dir: c.dataDir, PortBase: c.portBase.port, FallbackRandom: !c.portBase.set,
		Metrics: c.metrics, Secure: !c.insecure, Logger: s.log})
}
