package main

// `logplayer dev`: the whole system in one process on 127.0.0.1.
//
// Goroutines (besides each library's own, see their package docs): one
// grpc.Server.Serve per target; the LogPlayer's Run; with --demo, the
// workload's clients and progress reporter (package demo) and one
// demo.WatchApplied per shard.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
)

const (
	devShards = 3
	// eventsTarget is the in-memory target subscribed to the demo's event
	// topics.
	eventsTarget = "events"
	// devLeaderWait bounds the wait for the first Raft leader.
	devLeaderWait = 30 * time.Second
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

Ports: from --port-base B: LogStore APIs B..B+2, Raft B+10..B+12, LogPlayer
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
}

func (c *devCmd) flags(fs *flag.FlagSet) {
	c.portBase = portBaseValue{port: defaultPortBase}
	fs.StringVar(&c.dataDir, "data-dir", "", "keep the data in this `directory` (default: a temporary one, removed at exit)")
	fs.Var(&c.portBase, "port-base", "first `port` of the fixed layout; 0 for random ports")
	fs.BoolVar(&c.metrics, "metrics", true, "serve every component's Prometheus metrics on port base+40")
	fs.DurationVar(&c.demo, "demo", 0, "run the demo workload for this `duration`, check it and exit")
	fs.IntVar(&c.demoClients, "demo-clients", demo.DefaultClients, "concurrent producers of the demo")
	fs.Uint64Var(&c.seed, "seed", 0, "`seed` of the demo's randomness (default: from the clock)")
	fs.DurationVar(&c.catchUp, "catch-up", 60*time.Second, "how long the demo waits for delivery to catch up before checking")
}

// portBaseValue is --port-base; set records an explicit choice.
type portBaseValue struct {
	port int
	set  bool
}

func (v *portBaseValue) String() string { return strconv.Itoa(v.port) }
func (v *portBaseValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n+metricsPort > 65535 {
		return fmt.Errorf("want 0 (random ports) or a port up to %d", 65535-metricsPort)
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
	defer d.stop()
	d.printBanner(s.stdout, c.demo > 0)
	if c.demo == 0 {
		<-ctx.Done()
		fmt.Fprintln(s.stderr, "logplayer dev: shutting down")
		return nil
	}
	return d.runDemo(ctx, s, c)
}

// devCluster is everything dev started; stop releases it in reverse order.
type devCluster struct {
	log        *slog.Logger
	dir        string
	removeDir  bool
	nodes      []*logstore.Node
	storeAddrs []string
	raftAddrs  []string
	targets    []*devTarget
	player     *logplayer.Player
	playerStop context.CancelFunc
	playerDone chan error // Run's result, buffered
	admin      *adminServer
	metrics    *metricsServer
	rec        *demo.Recorder
	cl         *client.Client
	stopOnce   sync.Once
}

// devTarget is one in-process target and its subscription.
type devTarget struct {
	*targetServer
	topics []string
}

// devListeners are the sockets dev serves, bound before anything starts so
// a busy port fails early.
type devListeners struct {
	storeAPI, storeRaft []net.Listener
	admin               net.Listener
	targets             []net.Listener
	metrics             net.Listener
}

func (l *devListeners) all() []net.Listener {
	out := append(append(append([]net.Listener{l.admin}, l.storeAPI...), l.storeRaft...), l.targets...)
	if l.metrics != nil {
		out = append(out, l.metrics)
	}
	return out
}

func (l *devListeners) close() {
	for _, lis := range l.all() {
		if lis != nil {
			_ = lis.Close()
		}
	}
}

// storeAddrs are one LogStore node's addresses. A data directory's Raft
// configuration names them, so a restart on that directory must reuse them:
// dev records them in devStoresFile.
type storeAddrs struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	API  string `json:"api"`
}

// devStoresFile, in the data directory, records the stores' addresses.
const devStoresFile = "dev-stores.json"

// readDevStores returns the store addresses recorded in dir, or nil when
// dir holds no cluster yet.
func readDevStores(dir string) ([]storeAddrs, error) {
	b, err := os.ReadFile(filepath.Join(dir, devStoresFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct{ Stores []storeAddrs }
	if err := json.Unmarshal(b, &f); err != nil || len(f.Stores) != 3 {
		return nil, fmt.Errorf("%s: not a dev store list (%v); remove the data directory to start afresh", filepath.Join(dir, devStoresFile), err)
	}
	return f.Stores, nil
}

func writeDevStores(dir string, stores []storeAddrs) error {
	b, err := json.MarshalIndent(struct {
		Stores []storeAddrs `json:"stores"`
	}{stores}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, devStoresFile), append(b, '\n'), 0o644)
}

// listenDev binds every port of the layout from base (0: random ports),
// except the stores' when stores (recorded in the data directory) is set.
func listenDev(base int, metrics bool, stores []storeAddrs) (*devListeners, error) {
	l := &devListeners{}
	listenAt := func(addr string) (net.Listener, error) {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			l.close()
			return nil, err
		}
		return lis, nil
	}
	listen := func(offset int) (net.Listener, error) {
		port := 0
		if base != 0 {
			port = base + offset
		}
		return listenAt(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	var err error
	for i := range 3 {
		var api, raft net.Listener
		if stores != nil {
			api, err = listenAt(stores[i].API)
		} else {
			api, err = listen(storeAPIPort + i)
		}
		if err != nil {
			return nil, err
		}
		l.storeAPI = append(l.storeAPI, api)
		if stores != nil {
			raft, err = listenAt(stores[i].Raft)
		} else {
			raft, err = listen(storeRaftPort + i)
		}
		if err != nil {
			return nil, err
		}
		l.storeRaft = append(l.storeRaft, raft)
	}
	if l.admin, err = listen(playerPort); err != nil {
		return nil, err
	}
	for i := range devShards + 1 {
		lis, err := listen(shardPort + i)
		if err != nil {
			return nil, err
		}
		l.targets = append(l.targets, lis)
	}
	if metrics {
		if l.metrics, err = listen(metricsPort); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// startDev starts the stores, waits for a leader, starts the targets and
// the LogPlayer. On error it stops what it started.
func startDev(ctx context.Context, s *sys, c *devCmd) (_ *devCluster, err error) {
	d := &devCluster{log: s.log, dir: c.dataDir, rec: demo.NewRecorder(nil)}
	defer func() {
		if err != nil {
			d.stop()
		}
	}()
	if d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "logplayer-dev-"); err != nil {
			return nil, err
		}
		d.removeDir = true
	} else if err = os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, err
	}
	stores, err := readDevStores(d.dir)
	if err != nil {
		return nil, err
	}
	lis, err := listenDev(c.portBase.port, c.metrics, stores)
	if err != nil && c.portBase.port != 0 && !c.portBase.set {
		s.log.Warn("default ports busy; using random ports", "port_base", c.portBase.port, "err", err)
		lis, err = listenDev(0, c.metrics, stores)
	}
	switch {
	case err != nil && stores != nil:
		return nil, fmt.Errorf("%v: the cluster in %s was created on these LogStore addresses and must restart on them", err, d.dir)
	case err != nil:
		return nil, fmt.Errorf("%v (another logplayer dev running? pass --port-base 0 for random ports)", err)
	}
	defer func() {
		if err != nil {
			lis.close()
		}
	}()
	if stores == nil {
		for i := range 3 {
			stores = append(stores, storeAddrs{ID: nodeID(i), Raft: lis.storeRaft[i].Addr().String(), API: lis.storeAPI[i].Addr().String()})
		}
		if err = writeDevStores(d.dir, stores); err != nil {
			return nil, err
		}
	}
	gatherers := prometheus.Gatherers{processRegistry()}

	var peers []logstore.Peer
	for _, st := range stores {
		d.storeAddrs = append(d.storeAddrs, st.API)
		d.raftAddrs = append(d.raftAddrs, st.Raft)
		peers = append(peers, logstore.Peer{ID: st.ID, RaftAddr: st.Raft, APIAddr: st.API})
	}
	for i := range 3 {
		reg := prometheus.NewRegistry()
		gatherers = append(gatherers, reg)
		node, err := logstore.NewNode(logstore.Config{
			ID:            nodeID(i),
			Dir:           filepath.Join(d.dir, nodeID(i)),
			RaftListener:  lis.storeRaft[i],
			APIListener:   lis.storeAPI[i],
			Bootstrap:     peers,
			Logger:        s.log,
			Registry:      reg,
			ServerOptions: []grpc.ServerOption{allowPlayerPings()},
		})
		if err != nil {
			return nil, err
		}
		d.nodes = append(d.nodes, node)
	}
	if d.cl, err = client.New(client.Config{Addrs: d.storeAddrs, Logger: s.log}); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, devLeaderWait)
	_, err = d.cl.LeaderStatus(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("no LogStore leader within %v: %w", devLeaderWait, err)
	}

	targetReg := prometheus.NewRegistry()
	gatherers = append(gatherers, targetReg)
	for i := range devShards {
		id := demo.ShardTopic(i)
		sh, err := shard.Open(shard.Config{
			Dir: filepath.Join(d.dir, id), ID: id, Logger: s.log, Registerer: targetReg,
			WrapStore: func(st target.Store) target.Store { return d.rec.Record(id, st) },
		})
		if err != nil {
			return nil, err
		}
		d.serveTarget(id, []string{id}, lis.targets[i], sh.Register, sh.Close)
	}
	events, err := target.NewServer(target.Config{
		TargetID:   eventsTarget,
		Store:      d.rec.Record(eventsTarget, &demo.EventStore{}),
		Topics:     []string{demo.OrdersTopic, demo.InventoryTopic},
		Logger:     s.log,
		Registerer: targetReg,
	})
	if err != nil {
		return nil, err
	}
	d.serveTarget(eventsTarget, []string{demo.OrdersTopic, demo.InventoryTopic}, lis.targets[devShards],
		events.Register, func() error { events.Close(); return nil })

	playerReg := prometheus.NewRegistry()
	gatherers = append(gatherers, playerReg)
	var tcs []logplayer.TargetConfig
	for _, t := range d.targets {
		tcs = append(tcs, logplayer.TargetConfig{ID: t.id, Address: t.addr, Topics: t.topics})
	}
	if d.player, err = logplayer.New(logplayer.Config{
		PlayerID: "dev", LogStore: d.storeAddrs, Targets: tcs, Logger: s.log, Registerer: playerReg,
	}); err != nil {
		return nil, err
	}
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	d.playerStop, d.playerDone = pcancel, make(chan error, 1)
	go func() { d.playerDone <- d.player.Run(pctx) }()
	d.admin = serveAdminOn(lis.admin, d.player, s.log)

	if lis.metrics != nil {
		if d.metrics, err = serveMetricsOn(lis.metrics, gatherers, s.log); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func nodeID(i int) string { return "n" + strconv.Itoa(i+1) }

func (d *devCluster) serveTarget(id string, topics []string, lis net.Listener, register func(grpc.ServiceRegistrar), closeFn func() error) {
	d.targets = append(d.targets, &devTarget{targetServer: serveTarget(id, lis, register, closeFn, d.log), topics: topics})
}

// stop shuts everything down: the LogPlayer first (nothing more is
// delivered), then the targets, then the LogStore nodes.
func (d *devCluster) stop() {
	d.stopOnce.Do(func() {
		d.admin.stop()
		if d.player != nil {
			d.playerStop()
			within(devStopStepMax, d.log, "stop the LogPlayer", func() error {
				err := <-d.playerDone
				d.player.Close()
				return err
			})
		}
		for _, t := range d.targets {
			within(devStopStepMax, d.log, "stop target "+t.id, t.stop)
		}
		if d.cl != nil {
			_ = d.cl.Close()
		}
		for _, n := range d.nodes {
			within(devStopStepMax, d.log, "stop LogStore node "+n.ID(), n.Close)
		}
		d.metrics.stop()
		if d.removeDir {
			_ = os.RemoveAll(d.dir)
		}
	})
}

// devStopStepMax bounds each step of dev's shutdown, so a component that
// does not stop cannot hold the process (it is logged and left behind).
const devStopStepMax = 30 * time.Second

// within runs fn, logging its error, and gives up waiting after max.
func within(max time.Duration, log *slog.Logger, what string, fn func() error) {
	done := make(chan error, 1) // written once by fn's goroutine
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			log.Error(what, "err", err)
		}
	case <-time.After(max):
		log.Error(what+": gave up waiting", "after", max)
	}
}

func (d *devCluster) printBanner(w io.Writer, demoMode bool) {
	where := d.dir + ", removed at exit"
	if !d.removeDir {
		where = d.dir + ", kept"
	}
	fmt.Fprintf(w, "logplayer dev: 3 LogStore nodes, a LogPlayer and %d targets on 127.0.0.1 (data in %s)\n", len(d.targets), where)
	for i := range d.storeAddrs {
		fmt.Fprintf(w, "  store %-8s api %-16s raft %s\n", nodeID(i), d.storeAddrs[i], d.raftAddrs[i])
	}
	fmt.Fprintf(w, "  player         admin %s\n", d.admin.addr)
	for _, t := range d.targets {
		fmt.Fprintf(w, "  target %-7s %-20s topics %s\n", t.id, t.addr, strings.Join(t.topics, ","))
	}
	if d.metrics != nil {
		fmt.Fprintf(w, "  metrics        http://%s/metrics\n", d.metrics.Addr())
	}
	if demoMode {
		return
	}
	addr := "--addr " + strings.Join(d.storeAddrs, ",")
	fmt.Fprintf(w, `Try, in another terminal:
  logplayer append %s --topic orders='{"id":1}' --put shard-0:user/1=alice
  logplayer tail %s --follow
  logplayer status %s --player %s
Press Ctrl-C to stop.
`, addr, addr, addr, d.admin.addr)
}

// runDemo is dev --demo: the workload against the in-process cluster, with
// every target audited per apply (their stores are wrapped by the
// Recorder) and the LogPlayer's lag in the progress line.
func (d *devCluster) runDemo(ctx context.Context, s *sys, c *devCmd) error {
	shards := map[string]string{}
	cfg := demo.SessionConfig{
		Cluster: d.cl, Recorder: d.rec, Recorded: map[string][]string{},
		Duration: c.demo, CatchUp: c.catchUp, Clients: c.demoClients, Seed: c.seed,
		Lag: func() map[string]uint64 {
			out := map[string]uint64{}
			for _, t := range d.player.Targets() {
				out[t.ID] = t.LagEntries
			}
			return out
		},
	}
	for _, t := range d.targets {
		cfg.Recorded[t.id] = t.topics
		if t.id != eventsTarget {
			shards[t.id] = t.addr
		}
	}
	return runDemo(ctx, s, shards, cfg)
}
