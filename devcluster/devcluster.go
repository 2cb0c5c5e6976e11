// Package devcluster runs the whole system in one process on 127.0.0.1:
// a 3-node LogStore, the targets shard-0..2 (reference bbolt shards,
// shard-N subscribed to topic shard-N) and "events" (an in-memory target
// subscribed to the demo's orders and inventory topics), and a LogPlayer
// delivering to them, with its admin API and, optionally, every
// component's metrics on one endpoint. `logplayer dev` parses its flags
// and calls Start; tests start the same cluster. With Config.Secure every
// connection runs TLS with the dev policy (security.go).
//
// Ports: from Config.PortBase B, LogStore APIs B..B+2, their JSON over
// HTTP B+5..B+7 (package serve's StoreHTTP), Raft B+10..B+12,
// LogPlayer admin B+20, shards B+30..B+32, events B+33, metrics B+40
// (PortBase 0: random ports). Every socket is bound before anything
// starts, so a busy port fails early. A data directory records the
// LogStore nodes' addresses (dev-stores.json), since its Raft
// configuration names them: a later Start on it listens on them again.
//
// Goroutines (besides each library's own, see their package docs): one
// gRPC Serve and one HTTP Serve per LogStore node, per target and for the admin API (package
// serve); the /metrics HTTP server; the LogPlayer's Run. Stop ends them in
// order: admin, LogPlayer (nothing more is delivered), targets, the
// client, the LogStore nodes (HTTP server, API server, then node), metrics, each step
// bounded by StopStepMax.
package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/shard/mutation"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// The port layout: offsets from Config.PortBase of each role's ports.
const (
	DefaultPortBase = 7400
	StoreAPIPort    = 0  // 7400, 7401, 7402
	StoreHTTPPort   = 5  // 7405, 7406, 7407
	StoreRaftPort   = 10 // 7410, 7411, 7412
	PlayerPort      = 20 // 7420
	ShardPort       = 30 // 7430, 7431, 7432; the events target next
	MetricsPort     = 40 // 7440
)

const (
	// Stores is the number of LogStore nodes.
	Stores = 3
	// Shards is the number of reference shards (targets shard-0..).
	Shards = 3
	// EventsTarget is the in-memory target subscribed to the demo's event
	// topics.
	EventsTarget = "events"
	// LeaderWait bounds the wait for the first Raft leader.
	LeaderWait = 30 * time.Second
	// StopStepMax bounds each step of Stop, so a component that does not
	// stop cannot hold the process (it is logged and left behind).
	StopStepMax = 30 * time.Second
	// adminStopMax bounds the admin server's graceful stop.
	adminStopMax = 2 * time.Second
	// storesFile, in the data directory, records the stores' addresses.
	storesFile = "dev-stores.json"
)

// Config configures Start.
type Config struct {
	// Dir keeps the data; empty: a temporary directory removed at Stop.
	Dir string
	// PortBase is the first port of the layout; 0 for random ports.
	PortBase int
	// FallbackRandom: when PortBase's ports are busy (and the directory
	// records no stores), use random ports instead of failing.
	FallbackRandom bool
	// Metrics serves every component's metrics on PortBase+MetricsPort.
	Metrics bool
	// Secure runs every connection over TLS with the dev policy: Start
	// writes throwaway material into Dir/TLSDir (security.go) unless it is
	// there already. False: plaintext and open.
	Secure bool
	// Logger for every component (default slog.Default()).
	Logger *slog.Logger
}

// Cluster is everything Start started; Stop releases it in order.
type Cluster struct {
	// Dir is the data directory; RemoveDir when Stop deletes it.
	Dir       string
	RemoveDir bool
	// TLSDir holds the security material when Config.Secure ("" otherwise).
	TLSDir string
	// StoreAddrs, HTTPAddrs and RaftAddrs are the LogStore nodes' API,
	// JSON-over-HTTP API and Raft addresses, node NodeID(i) at i.
	StoreAddrs, HTTPAddrs, RaftAddrs []string
	// Targets are the shards (in order) then the events target.
	Targets []*Target
	// Player is the LogPlayer (running); Client a LogStore client.
	Player *logplayer.Player
	Client *client.Client
	// Recorder wraps every target's store (the demo audits it).
	Recorder *demo.Recorder

	log        *slog.Logger
	stores     []*serve.Store
	storeHTTP  []*serve.StoreHTTP
	playerStop context.CancelFunc
	playerDone chan error // Run's result, buffered
	admin      *serve.GRPC
	metrics    *serve.Metrics
	stopOnce   sync.Once
}

// Target is one in-process target and its subscription.
type Target struct {
	*serve.Target
	Topics []string
}

// AdminAddr is the LogPlayer admin API's address.
func (c *Cluster) AdminAddr() string { return c.admin.Addr() }

// MetricsAddr is the metrics endpoint's address ("" when not served).
func (c *Cluster) MetricsAddr() string {
	if c.metrics == nil {
		return ""
	}
	return c.metrics.Addr()
}

// NodeID is the id of LogStore node i (n1, n2, n3).
func NodeID(i int) string { return "n" + strconv.Itoa(i+1) }

// playerPings lets a gRPC server accept the LogPlayer's keepalive pings
// (gRPC's default policy answers pings more frequent than 5 minutes with
// GOAWAY too_many_pings): every server the LogPlayer connects to.
func playerPings() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive)
}

// listeners are the sockets the cluster serves, bound before anything
// starts.
type listeners struct {
	storeAPI, storeHTTP, storeRaft []net.Listener
	admin                          net.Listener
	targets                        []net.Listener
	metrics                        net.Listener
}

func (l *listeners) all() []net.Listener {
	out := append(append(append(append([]net.Listener{l.admin}, l.storeAPI...), l.storeHTTP...), l.storeRaft...), l.targets...)
	if l.metrics != nil {
		out = append(out, l.metrics)
	}
	return out
}

func (l *listeners) close() {
	for _, lis := range l.all() {
		if lis != nil {
			_ = lis.Close()
		}
	}
}

// storeAddrs are one LogStore node's addresses, as recorded in storesFile.
type storeAddrs struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	API  string `json:"api"`
	// HTTP is the JSON-over-HTTP API (absent in files of older versions:
	// then the layout's port, or a random one).
	HTTP string `json:"http,omitempty"`
}

// readStores returns the store addresses recorded in dir, or nil when dir
// holds no cluster yet.
func readStores(dir string) ([]storeAddrs, error) {
	b, err := os.ReadFile(filepath.Join(dir, storesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct{ Stores []storeAddrs }
	if err := json.Unmarshal(b, &f); err != nil || len(f.Stores) != Stores {
		return nil, fmt.Errorf("%s: not a dev store list (%v); remove the data directory to start afresh", filepath.Join(dir, storesFile), err)
	}
	return f.Stores, nil
}

func writeStores(dir string, stores []storeAddrs) error {
	b, err := json.MarshalIndent(struct {
		Stores []storeAddrs `json:"stores"`
	}{stores}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, storesFile), append(b, '\n'), 0o644)
}

// listen binds every port of the layout from base (0: random ports),
// except the stores' when stores (recorded in the data directory) is set.
func listen(base int, metrics bool, stores []storeAddrs) (*listeners, error) {
	l := &listeners{}
	listenAt := func(addr string) (net.Listener, error) {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			l.close()
			return nil, err
		}
		return lis, nil
	}
	at := func(offset int) (net.Listener, error) {
		port := 0
		if base != 0 {
			port = base + offset
		}
		return listenAt(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	// recordedOr listens on the recorded address, or at offset when none.
	recordedOr := func(recorded string, offset int) (net.Listener, error) {
		if recorded != "" {
			return listenAt(recorded)
		}
		return at(offset)
	}
	var err error
	for i := range Stores {
		var rec storeAddrs
		if stores != nil {
			rec = stores[i]
		}
		api, err := recordedOr(rec.API, StoreAPIPort+i)
		if err != nil {
			return nil, err
		}
		l.storeAPI = append(l.storeAPI, api)
		httpAPI, err := recordedOr(rec.HTTP, StoreHTTPPort+i)
		if err != nil {
			return nil, err
		}
		l.storeHTTP = append(l.storeHTTP, httpAPI)
		raft, err := recordedOr(rec.Raft, StoreRaftPort+i)
		if err != nil {
			return nil, err
		}
		l.storeRaft = append(l.storeRaft, raft)
	}
	if l.admin, err = at(PlayerPort); err != nil {
		return nil, err
	}
	for i := range Shards + 1 {
		lis, err := at(ShardPort + i)
		if err != nil {
			return nil, err
		}
		l.targets = append(l.targets, lis)
	}
	if metrics {
		if l.metrics, err = at(MetricsPort); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Start starts the stores, waits for a leader (at most LeaderWait), starts
// the targets and the LogPlayer. On error it stops what it started. ctx
// bounds the start only: the LogPlayer runs until Stop.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger
	// The stores run in this process and the cluster declares shard-* kv
	// (topics.go): every node must hold the kv validator (logstore/schema).
	mutation.RegisterSchema()
	c := &Cluster{log: log, Dir: cfg.Dir, Recorder: demo.NewRecorder(nil)}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "logplayer-dev-"); err != nil {
			return nil, err
		}
		c.RemoveDir = true
	} else if err = os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Secure {
		c.TLSDir = filepath.Join(c.Dir, TLSDir)
		if err = writeSecurity(c.TLSDir); err != nil {
			return nil, err
		}
	}
	stores, err := readStores(c.Dir)
	if err != nil {
		return nil, err
	}
	lis, err := listen(cfg.PortBase, cfg.Metrics, stores)
	if err != nil && cfg.PortBase != 0 && cfg.FallbackRandom {
		log.Warn("default ports busy; using random ports", "port_base", cfg.PortBase, "err", err)
		lis, err = listen(0, cfg.Metrics, stores)
	}
	switch {
	case err != nil && stores != nil:
		return nil, fmt.Errorf("%v: the cluster in %s was created on these LogStore addresses and must restart on them", err, c.Dir)
	case err != nil:
		return nil, fmt.Errorf("%v (another logplayer dev running? pass --port-base 0 for random ports)", err)
	}
	defer func() {
		if err != nil {
			lis.close()
		}
	}()
	if stores == nil {
		for i := range Stores {
			stores = append(stores, storeAddrs{ID: NodeID(i), Raft: lis.storeRaft[i].Addr().String(), API: lis.storeAPI[i].Addr().String()})
		}
	}
	for i := range stores {
		stores[i].HTTP = lis.storeHTTP[i].Addr().String()
	}
	if err = writeStores(c.Dir, stores); err != nil {
		return nil, err
	}
	gatherers := prometheus.Gatherers{serve.ProcessRegistry()}

	var peers []logstore.Peer
	for _, st := range stores {
		c.StoreAddrs = append(c.StoreAddrs, st.API)
		c.HTTPAddrs = append(c.HTTPAddrs, st.HTTP)
		c.RaftAddrs = append(c.RaftAddrs, st.Raft)
		peers = append(peers, logstore.Peer{ID: st.ID, RaftAddr: st.Raft, APIAddr: st.API})
	}
	for i := range Stores {
		reg := prometheus.NewRegistry()
		gatherers = append(gatherers, reg)
		scfg := logstore.Config{
			ID:           NodeID(i),
			Dir:          filepath.Join(c.Dir, NodeID(i)),
			RaftListener: lis.storeRaft[i],
			APIAddr:      peers[i].APIAddr,
			HTTPAddr:     stores[i].HTTP,
			Bootstrap:    peers,
			Logger:       log,
			Registry:     reg,
			// `append --producer-id` uses legacy (unregistered) producer
			// ids (the demo workload registers its producers).
			AllowLegacyProducers: true,
		}
		opts, err := c.serverOptions(NodeID(i), nil)
		if err != nil {
			return nil, err
		}
		if c.TLSDir != "" {
			if scfg.RaftStream, err = serve.RaftTLS(lis.storeRaft[i], c.TLSFiles(NodeID(i)), raftPeers(), log); err != nil {
				return nil, err
			}
			// The leader polls the other nodes' supported versions
			// (logstore/version.go) as this node.
			if scfg.PeerDialOptions, err = c.DialOptions(NodeID(i)); err != nil {
				return nil, err
			}
		}
		st, err := serve.StartStore(scfg, lis.storeAPI[i], "", log, append(opts, playerPings())...)
		if err != nil {
			return nil, err
		}
		c.stores = append(c.stores, st)
		hs, err := serve.ServeStoreHTTP(st.API, lis.storeHTTP[i], c.serverTLS(NodeID(i)), log)
		lis.storeHTTP[i] = nil // served, or closed by ServeStoreHTTP
		if err != nil {
			return nil, err
		}
		c.storeHTTP = append(c.storeHTTP, hs)
	}
	cliOpts, err := c.DialOptions(CLIToken)
	if err != nil {
		return nil, err
	}
	if c.Client, err = client.New(client.Config{Addrs: c.StoreAddrs, Logger: log, DialOptions: cliOpts}); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, LeaderWait)
	_, err = c.Client.LeaderStatus(lctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("no LogStore leader within %v: %w", LeaderWait, err)
	}
	err = c.declareTopics(lctx) // topics.go
	cancel()
	if err != nil {
		return nil, err
	}

	targetReg := prometheus.NewRegistry()
	gatherers = append(gatherers, targetReg)
	for i := range Shards {
		id := demo.ShardTopic(i)
		sh, err := shard.Open(shard.Config{
			Dir: filepath.Join(c.Dir, id), ID: types.TargetID(id), Logger: log, Registerer: targetReg,
			WrapStore: func(st target.Store) target.Store { return c.Recorder.Record(id, st) },
		})
		if err != nil {
			return nil, err
		}
		if err = c.serveTarget(id, []string{id}, lis.targets[i], sh.Register, sh.Close); err != nil {
			_ = sh.Close()
			return nil, err
		}
	}
	eventTopics := []string{demo.OrdersTopic, demo.InventoryTopic}
	events, err := target.NewServer(target.Config{
		TargetID:   EventsTarget,
		Store:      c.Recorder.Record(EventsTarget, &demo.EventStore{}),
		Topics:     eventTopics,
		Logger:     log,
		Registerer: targetReg,
	})
	if err != nil {
		return nil, err
	}
	if err = c.serveTarget(EventsTarget, eventTopics, lis.targets[Shards], events.Register, func() error { events.Close(); return nil }); err != nil {
		events.Close()
		return nil, err
	}

	playerReg := prometheus.NewRegistry()
	gatherers = append(gatherers, playerReg)
	var tcs []logplayer.TargetConfig
	for _, t := range c.Targets {
		tcs = append(tcs, logplayer.TargetConfig{ID: t.ID, Address: t.Addr(), Topics: t.Topics})
	}
	playerOpts, err := c.DialOptions(PlayerIdentity)
	if err != nil {
		return nil, err
	}
	adminOpts, err := c.serverOptions(PlayerIdentity, nil)
	if err != nil {
		return nil, err
	}
	if c.Player, err = logplayer.New(logplayer.Config{
		PlayerID: "dev", LogStore: c.StoreAddrs, Targets: tcs, Logger: log, Registerer: playerReg,
		DialOptions: playerOpts,
	}); err != nil {
		return nil, err
	}
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	c.playerStop, c.playerDone = pcancel, make(chan error, 1)
	go func() { c.playerDone <- c.Player.Run(pctx) }()
	c.admin = serve.StartAdmin(lis.admin, logplayer.NewAdminServer(c.Player).Register, log, adminOpts...)
	log.Info("admin endpoint", "addr", c.admin.Addr())

	if lis.metrics != nil {
		c.metrics = serve.ServeMetricsOn(lis.metrics, gatherers, log)
	}
	return c, nil
}

func (c *Cluster) serveTarget(id string, topics []string, lis net.Listener, register func(grpc.ServiceRegistrar), closeFn func() error) error {
	sec, err := c.serverOptions(id, topics)
	if err != nil {
		return err
	}
	opts := append(append(target.ServerOptions(), playerPings()), sec...)
	c.Targets = append(c.Targets, &Target{Target: serve.StartTarget(id, lis, register, closeFn, c.log, opts...), Topics: topics})
	return nil
}

// Stop shuts everything down: the admin API and the LogPlayer first
// (nothing more is delivered), then the targets, then the LogStore nodes,
// then metrics; it removes a temporary data directory. Safe to call more
// than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.admin.Stop(adminStopMax)
		if c.Player != nil {
			c.playerStop()
			within(StopStepMax, c.log, "stop the LogPlayer", func() error {
				err := <-c.playerDone
				c.Player.Close()
				return err
			})
		}
		for _, t := range c.Targets {
			within(StopStepMax, c.log, "stop target "+t.ID, t.Stop)
		}
		if c.Client != nil {
			_ = c.Client.Close()
		}
		for i, st := range c.stores {
			if i < len(c.storeHTTP) {
				within(StopStepMax, c.log, "stop the HTTP API of "+st.Node.ID(), func() error { c.storeHTTP[i].Stop(); return nil })
			}
			within(StopStepMax, c.log, "stop LogStore node "+st.Node.ID(), st.Close)
		}
		c.metrics.Stop()
		if c.RemoveDir {
			_ = os.RemoveAll(c.Dir)
		}
	})
}

// within runs fn, logging its error, and gives up waiting after max.
func within(max time.Duration, log *slog.Logger, what string, fn func() error) {
	done := make(chan error, 1) // written once by fn's goroutine
	go func() { done <- fn() }()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Error(what, "err", err)
		}
	case <-t.C:
		log.Error(what+": gave up waiting", "after", max)
	}
}
