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
	"github.com/logplayer/logplayer/internal/cli"
)

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

func (c *devCmd) Flags(fs *flag.FlagSet) {
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

func (c *devCmd) Run(ctx context.Context, s *cli.Sys) error {
	if c.demo < 0 || c.demoClients < 1 || c.catchUp <= 0 {
		return cli.Usagef("--demo, --demo-clients and --catch-up must be positive")
	}
	d, err := startDev(ctx, s, c)
	if err != nil {
		return err
	}
	defer d.Stop()
	d.WriteBanner(s.Stdout, c.demo > 0, app.EnvName("tls-ca"), app.EnvName("token-file"))
	if c.demo == 0 {
		<-ctx.Done()
		fmt.Fprintln(s.Stderr, "logplayer dev: shutting down")
		return nil
	}
	rep, err := d.Demo(ctx, demo.SessionConfig{Duration: c.demo, CatchUp: c.catchUp, Clients: c.demoClients, Seed: c.seed, Out: s.Stderr, Logger: s.Log})
	return writeDemoReport(s, rep, err)
}

// devCluster is the running dev cluster (the name the tests use).
type devCluster = devcluster.Cluster

// startDev starts the dev cluster of c's flags (devcluster.Start).
func startDev(ctx context.Context, s *cli.Sys, c *devCmd) (*devCluster, error) {
	return devcluster.Start(ctx, devcluster.Config{Dir: c.dataDir, PortBase: c.portBase.port, FallbackRandom: !c.portBase.set,
		Metrics: c.metrics, Secure: !c.insecure, Logger: s.Log})
}
