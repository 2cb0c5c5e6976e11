// Package bench measures LogStore commit latency and throughput against
// bare hashicorp/raft on the same machine, in the same run (docs/DESIGN.md, "Numbers to beat";
// issue 11).
//
// Run starts, for the systems it is asked for, 3 LogStore nodes per Raft
// log backend (raft-wal and raft-boltdb; TCP on 127.0.0.1, fsync on, the
// segment log; in this process, or with Config.ServerCommand in a server
// process per backend: child.go) and 3 bare rafts per backend (TCP transport, no-op
// FSM, hashicorp/raft's default config). For each concurrency level it runs
// every system in turn, back to back, so the rows of a level share the
// machine's conditions (a shared machine drifts a lot over a whole run):
//   - the LogStore with that many client goroutines sharing one
//     client.Client (which coalesces concurrent Appends into AppendBatch
//     calls), each doing one Append at a time (a txn of Topics topics × one
//     SliceBytes message);
//   - the LogStore with one client.Client, hence one gRPC connection, per
//     client goroutine: many independent producers, each call one txn;
//   - the LogStore with one HTTP client per client goroutine, each
//     transaction a JSON POST /v1/append to the leader (http.go);
//   - bare raft, raft.Apply of a payload of the same size.
//
// A row counts the operations that complete inside its measured window
// (Warmup after the load starts, for Duration): an operation that starts in
// the warmup and ends in the window counts, one that ends after the window
// does not. Latencies are those of the counted operations, summarized by
// internal/quantile. For the LogStore, the leader's histograms split the
// mean latency (over the row's whole load): intake → apply result at the
// leader (aggregator wait + Raft commit) and raft.Apply → result (the
// commit alone); the rest is the gRPC call and the client. CPU per
// transaction is the process's CPU time (every
// node, client and goroutine of the run: they share this process) over the
// row's whole load divided by the operations that succeeded in it: on a
// machine shared with other work, tx/s follows the CPU share the process
// gets, CPU per transaction does not. A row whose servers run in a server
// process measures both processes' CPU over its window instead, and the
// server process's alone as its server CPU (measureOn). Rows report tx/s, p50/p99/p99.9 and, for the LogStore,
// the transactions per gRPC call and per Raft entry the leader saw.
// Table.String prints the rows and the goal ratios marked met or
// missed; Table.WriteCharts draws them.
//
// Goroutines: one per simulated client during a row; the nodes' own.
package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/security"
)

// System names one measured configuration (Row.System, Config.Systems).
type System string

// The systems, in the order a level runs them.
const (
	// LogStoreWAL is the LogStore on raft-wal (the node default), its
	// clients sharing one client.Client.
	LogStoreWAL System = "logstore-wal"
	// LogStoreWALConns is the LogStore on raft-wal with one client.Client
	// (one connection) per client.
	LogStoreWALConns System = "logstore-wal-conns"
	// LogStoreBoltDB and LogStoreBoltDBConns are the same on raft-boltdb.
	LogStoreBoltDB      System = "logstore-boltdb"
	LogStoreBoltDBConns System = "logstore-boltdb-conns"
	// RaftWAL and RaftBoltDB are bare hashicorp/raft on each backend.
	RaftWAL    System = "raft-wal"
	RaftBoltDB System = "raft-boltdb"
	// GRPCConns is no LogStore at all: a no-op unary gRPC call carrying the
	// transaction's bytes, one connection per client (floor.go). It is the
	// floor under LogStoreWALConns on this machine.
	GRPCConns System = "grpc-conns"
	// LogStoreWALHTTP is the LogStore on raft-wal with each client
	// appending as JSON over HTTP (POST /v1/append) on connections of its
	// own, to the leader (http.go): beside LogStoreWALConns, the cost of
	// JSON over HTTP.
	LogStoreWALHTTP System = "logstore-wal-http"
)

// Systems lists every system, in run order.
var Systems = []System{LogStoreWAL, LogStoreWALConns, LogStoreWALHTTP, LogStoreBoltDB, LogStoreBoltDBConns, RaftWAL, RaftBoltDB, GRPCConns}

// ErrUnknownSystem is returned by ParseSystems and Run for a name not in
// Systems.
var ErrUnknownSystem = fmt.Errorf("bench: unknown system (want some of %s)", joinSystems(Systems))

func joinSystems(ss []System) string {
	var names []string
	for _, s := range ss {
		names = append(names, string(s))
	}
	return strings.Join(names, ",")
}

// ParseSystems parses a comma-separated list of system names; "all" is
// every system. A name that is not a system's is a prefix of dash-separated
// words ("logstore" is the four LogStore systems, "raft" the two bare ones).
func ParseSystems(list string) ([]System, error) {
	var out []System
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		exact := slices.Contains(Systems, System(name))
		matched := false
		for _, s := range Systems {
			if name == "all" || string(s) == name || !exact && strings.HasPrefix(string(s), name+"-") {
				matched = true
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
		if !matched {
			return nil, fmt.Errorf("%w: %q", ErrUnknownSystem, name)
		}
	}
	return out, nil
}

// backend is the Raft log store a system runs on.
func (s System) backend() logstore.RaftLogStore {
	if strings.Contains(string(s), "boltdb") {
		return logstore.RaftLogBoltDB
	}
	return logstore.RaftLogWAL
}

// bare reports whether s is bare hashicorp/raft.
func (s System) bare() bool { return strings.HasPrefix(string(s), "raft-") }

// logstore reports whether s is the LogStore (the systems with batching
// and commit figures).
func (s System) logstore() bool { return strings.HasPrefix(string(s), "logstore-") }

// conns reports whether s gives each client a connection of its own.
func (s System) conns() bool { return strings.HasSuffix(string(s), "-conns") }

// Config configures Run. Zero fields get the defaults.
type Config struct {
	// Clients lists the concurrency levels (default 1, 10, 64, 256).
	Clients []int
	// Systems lists what to measure (default Systems), run in Systems'
	// order within each level.
	Systems []System
	// Duration of each row's measurement (default 3s), after Warmup
	// (default 300ms) of the same load.
	Duration time.Duration
	Warmup   time.Duration
	// NoServerCPU skips the row's CPU profile (the server CPU column stays
	// empty). For tests in a testing/synctest bubble: the profiler's
	// reader goroutine blocks in a syscall, never durably, so the bubble's
	// clock would never advance.
	NoServerCPU bool
	// RowProfileDir, when set, receives each row's CPU profile (the one
	// the server CPU column is read from) as <clients>-<system>.pprof, for
	// `go tool pprof -tagfocus bench=server`.
	RowProfileDir string
	// Topics per transaction (default 2) and bytes per slice (default 256).
	Topics     int
	SliceBytes int
	// Dir is where the nodes' data goes (default: a new temp dir, removed
	// after the run).
	Dir string
	// PlainAppends makes every client send each transaction in an Append
	// call of its own instead of coalescing concurrent ones into
	// AppendBatch calls (client.Config.MaxBatchBytes < 0).
	PlainAppends bool
	// Tuning sets LogStore node settings (tuning experiments: aggregator
	// and Raft settings), in this process or a server process.
	Tuning Tuning
	// Node, if set, edits each LogStore node's config before it starts,
	// after Tuning (in this process only).
	Node func(*logstore.Config)
	// ServerCommand, when set, runs the servers of the LogStore systems
	// and of grpc-conns in child processes (child.go), so that a row's
	// server CPU is a process's own: the command line (argv) of a program
	// whose entry calls ServeChild, such as cmd/logplayer's `bench store`.
	// It needs Node and ServerOptions unset; a run with Security keeps
	// its servers in this process (the rows say which, Row.ServerProcess).
	// Bare raft and the 1-client level stay in this process (bed.inChild).
	ServerCommand []string
	// ServerStderr gets the server processes' standard error (default
	// os.Stderr).
	ServerStderr io.Writer
	// ServerOptions are added to each LogStore node's gRPC server.
	ServerOptions []grpc.ServerOption
	// Security, when set, runs the client API and Raft over TLS (nil:
	// plaintext).
	Security *Security
	// Logger for the nodes (default: discard).
	Logger *slog.Logger
}

// Security is the TLS of a run: what cmd/logplayer's `bench --tls` builds
// from throwaway certificates.
type Security struct {
	// ServerOptions are added to every gRPC server (stores, targets).
	ServerOptions []grpc.ServerOption
	// RaftStream returns a node's Raft stream layer on its listener.
	RaftStream func(lis net.Listener) (raft.StreamLayer, error)
	// DialOptions are added to every client (the benchmark's, a LogPlayer).
	DialOptions []grpc.DialOption
	// HTTPServer is the TLS of the nodes' JSON-over-HTTP API and
	// HTTPClient its clients' (LogStoreWALHTTP; both needed with TLS).
	HTTPServer *security.ServerOptions
	HTTPClient *tls.Config
}

func (c *Config) validate() error {
	if len(c.Clients) == 0 {
		c.Clients = []int{1, 10, 64, 256}
	}
	for _, n := range c.Clients {
		if n <= 0 {
			return fmt.Errorf("bench: client count %d", n)
		}
	}
	if len(c.Systems) == 0 {
		c.Systems = Systems
	}
	for _, s := range c.Systems {
		if !slices.Contains(Systems, s) {
			return fmt.Errorf("%w: %q", ErrUnknownSystem, s)
		}
	}
	if len(c.ServerCommand) > 0 && (c.Node != nil || len(c.ServerOptions) > 0) {
		return errors.New("bench: Config.Node and ServerOptions do not reach server processes (ServerCommand): use Tuning, or no ServerCommand")
	}
	if _, child := os.LookupEnv(ServerChildEnv); child && len(c.ServerCommand) > 0 {
		// A server child whose entry does not call ServeChild would run
		// a benchmark with server children of its own, and so on.
		return fmt.Errorf("bench: %s is set: this process is a server child, its entry must call ServeChild", ServerChildEnv)
	}
	if c.ServerStderr == nil {
		c.ServerStderr = os.Stderr
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = 300 * time.Millisecond
	}
	if c.Topics <= 0 {
		c.Topics = 2
	}
	if c.SliceBytes <= 0 {
		c.SliceBytes = 256
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// op is one operation of a client: an Append or a raft.Apply.
type op func(context.Context) error

// bed holds what a run started: a LogStore cluster and a bare raft per
// backend that some system needs, and each cluster's shared client.
type bed struct {
	cfg      Config
	dir      string
	clusters map[logstore.RaftLogStore]*Cluster
	shared   map[logstore.RaftLogStore]*client.Client
	rafts    map[logstore.RaftLogStore]*bareRaft
	floor    *floorServer
	// children are the server processes (Config.ServerCommand): a
	// LogStore cluster's by backend, the floor's under floorChild; and
	// childShared the shared client of each child's cluster.
	children    map[logstore.RaftLogStore]*serverChild
	childShared map[logstore.RaftLogStore]*client.Client
	req         *logstorepb.AppendRequest
	reqJSON     []byte // req in protojson (LogStoreWALHTTP)
	payload     []byte
}

func (b *bed) close() {
	for _, c := range b.shared {
		c.Close()
	}
	for _, c := range b.childShared {
		c.Close()
	}
	for _, c := range b.clusters {
		c.Close()
	}
	for _, r := range b.rafts {
		r.close()
	}
	if b.floor != nil {
		b.floor.close()
	}
	for _, c := range b.children {
		c.stop()
	}
}

// floorChild is the key of the floor's process in bed.children.
const floorChild logstore.RaftLogStore = "floor"

// inChild reports whether s's servers run in a server process at n
// clients. The serial level (1 client) stays in this process: its goal
// compares the LogStore's latency with bare raft's, which runs here, and
// a process hop adds 0.1 ms to an idle call (docs/BENCHMARKS.md, "Server
// CPU in a process of its own").
func (b *bed) inChild(s System, n int) bool {
	return len(b.cfg.ServerCommand) > 0 && b.cfg.Security == nil && !s.bare() && n > 1
}

// child returns the server process of s at n clients (nil: s's servers
// run in this process).
func (b *bed) child(s System, n int) *serverChild {
	if !b.inChild(s, n) {
		return nil
	}
	if s == GRPCConns {
		return b.children[floorChild]
	}
	if s.bare() {
		return nil
	}
	return b.children[s.backend()]
}

// startChild starts s's server process (s is not bare raft).
func (b *bed) startChild(s System) error {
	key, spec := s.backend(), childSpec{Role: roleLogStore, Backend: s.backend(), Tuning: b.cfg.Tuning}
	if s == GRPCConns {
		key, spec = floorChild, childSpec{Role: roleFloor}
	} else {
		if b.cfg.Dir != "" { // the data stays where it was asked to go
			spec.Dir = filepath.Join(b.cfg.Dir, "server-"+string(key))
		}
		spec.HTTP = key == LogStoreWALHTTP.backend() && slices.Contains(b.cfg.Systems, LogStoreWALHTTP)
	}
	if b.children[key] != nil {
		return nil
	}
	c, err := startServerChild(b.cfg.ServerCommand, spec, b.cfg.ServerStderr)
	if err != nil {
		return err
	}
	b.children[key] = c
	if s == GRPCConns {
		return nil
	}
	cl, err := b.newClient(c.ready.API)
	if err != nil {
		return err
	}
	b.childShared[key] = cl
	return nil
}

// start starts what s needs at n clients, unless already started.
func (b *bed) start(s System, n int) error {
	if b.inChild(s, n) {
		return b.startChild(s)
	}
	if s == GRPCConns {
		if b.floor != nil {
			return nil
		}
		var opts []grpc.ServerOption
		if b.cfg.Security != nil {
			opts = b.cfg.Security.ServerOptions
		}
		var f *floorServer
		var err error
		asServer(func() { f, err = startFloor(opts) })
		if err != nil {
			return err
		}
		b.floor = f
		return nil
	}
	be := s.backend()
	if s.bare() {
		if b.rafts[be] != nil {
			return nil
		}
		var r *bareRaft
		var err error
		asServer(func() { r, err = startBareRaft(filepath.Join(b.dir, "raft-"+string(be)), be, b.cfg.Logger) })
		if err != nil {
			return err
		}
		b.rafts[be] = r
		return nil
	}
	if b.clusters[be] != nil {
		return nil
	}
	var c *Cluster
	var err error
	asServer(func() {
		c, err = startCluster(filepath.Join(b.dir, "logstore-"+string(be)), b.cfg.Logger, b.cfg.ServerOptions, b.cfg.Security, func(nc *logstore.Config) {
			nc.RaftLogStore = be
			b.cfg.Tuning.apply(nc)
			if b.cfg.Node != nil {
				b.cfg.Node(nc)
			}
		})
	})
	if err != nil {
		return err
	}
	b.clusters[be] = c
	if be == LogStoreWALHTTP.backend() && slices.Contains(b.cfg.Systems, LogStoreWALHTTP) {
		asServer(func() { err = c.serveHTTP(b.cfg.Security, b.cfg.Logger) })
		if err != nil {
			return err
		}
	}
	cl, err := b.newClient(c.APIAddrs())
	if err != nil {
		return err
	}
	b.shared[be] = cl
	return nil
}

func (b *bed) newClient(addrs []string) (*client.Client, error) {
	ccfg := client.Config{Addrs: addrs, Logger: b.cfg.Logger}
	if b.cfg.Security != nil {
		ccfg.DialOptions = b.cfg.Security.DialOptions
	}
	if b.cfg.PlainAppends {
		ccfg.MaxBatchBytes = -1
	}
	return client.New(ccfg)
}

func (b *bed) appendOn(cl *client.Client) op {
	return func(ctx context.Context) error {
		_, err := cl.Append(ctx, b.req)
		return err
	}
}

// row measures s with n clients.
func (b *bed) row(ctx context.Context, s System, n int) (Row, error) {
	if err := b.start(s, n); err != nil {
		return Row{}, err
	}
	ops := make([]op, n)
	if s.bare() {
		r := b.rafts[s.backend()]
		for i := range ops {
			ops[i] = func(context.Context) error { return r.leader().Apply(b.payload, 10*time.Second).Error() }
		}
		return measure(ctx, s, ops, b.cfg), nil
	}
	child := b.child(s, n)
	if s == GRPCConns {
		addr := ""
		if child != nil {
			addr = child.ready.API[0]
		} else {
			addr = b.floor.addr
		}
		for i := range ops {
			o, closeConn, err := dialFloor(addr, b.payload, b.cfg.Security)
			if err != nil {
				return Row{}, err
			}
			defer closeConn()
			ops[i] = o
		}
		return measureOn(ctx, s, ops, b.cfg, child)
	}
	var srv servers = b.clusters[s.backend()]
	shared := b.shared[s.backend()]
	if child != nil {
		srv, shared = child, b.childShared[s.backend()]
	}
	switch {
	case s == LogStoreWALHTTP:
		base, err := srv.httpLeader()
		if err != nil {
			return Row{}, err
		}
		if base == "" {
			return Row{}, fmt.Errorf("bench: %s: no leader", s)
		}
		for i := range ops {
			o, closeClient := httpAppend(base, b.reqJSON, b.cfg.Security)
			defer closeClient()
			ops[i] = o
		}
	case s.conns():
		for i := range ops {
			cl, err := b.newClient(srv.addrs())
			if err != nil {
				return Row{}, err
			}
			defer cl.Close()
			ops[i] = b.appendOn(cl)
		}
	default:
		for i := range ops {
			ops[i] = b.appendOn(shared)
		}
	}
	before, err := srv.figures()
	if err != nil {
		return Row{}, err
	}
	row, err := measureOn(ctx, s, ops, b.cfg, child)
	if err != nil {
		return Row{}, err
	}
	after, err := srv.figures()
	if err != nil {
		return Row{}, err
	}
	ls := after.since(before)
	row.TxnsPerEntry, row.TxnsPerCall, row.LeaderAppend, row.RaftCommit = ls.perEntry, ls.perCall, ls.append, ls.commit
	return row, nil
}

// Run measures, for each concurrency level, each of cfg.Systems. ctx
// cancels between rows.
func Run(ctx context.Context, cfg Config) (Table, error) {
	if err := cfg.validate(); err != nil {
		return Table{}, err
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "logstore-bench-")
		if err != nil {
			return Table{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	b := &bed{cfg: cfg, dir: dir,
		clusters:    map[logstore.RaftLogStore]*Cluster{},
		shared:      map[logstore.RaftLogStore]*client.Client{},
		rafts:       map[logstore.RaftLogStore]*bareRaft{},
		children:    map[logstore.RaftLogStore]*serverChild{},
		childShared: map[logstore.RaftLogStore]*client.Client{},
		req:         appendRequest(cfg),
		payload:     make([]byte, cfg.Topics*cfg.SliceBytes),
	}
	defer b.close()
	var err error
	if b.reqJSON, err = protojson.Marshal(b.req); err != nil {
		return Table{}, err
	}
	// Start everything before the first row, so no row shares the
	// machine with a cluster's start.
	for _, n := range cfg.Clients {
		for _, s := range cfg.Systems {
			if err := b.start(s, n); err != nil {
				return Table{}, err
			}
		}
	}
	table := Table{Duration: cfg.Duration, Topics: cfg.Topics, SliceBytes: cfg.SliceBytes}
	for _, n := range cfg.Clients {
		for _, s := range cfg.Systems {
			if err := ctx.Err(); err != nil {
				return table, err
			}
			row, err := b.row(ctx, s, n)
			if err != nil {
				return table, err
			}
			table.Rows = append(table.Rows, row)
		}
	}
	return table, ctx.Err()
}

// appendRequest is the transaction every LogStore client appends: Topics
// topics × one SliceBytes message.
func appendRequest(cfg Config) *logstorepb.AppendRequest {
	req := &logstorepb.AppendRequest{}
	for i := range cfg.Topics {
		req.Slices = append(req.Slices, &logstorepb.Slice{Topic: fmt.Sprintf("bench-%d", i),
			Messages: []*logstorepb.Message{{Value: make([]byte, cfg.SliceBytes)}}})
	}
	return req
}

// measure runs one goroutine per op, each calling its op back to back from
// now until Warmup+Duration, and summarizes the calls that completed inside
// the window [Warmup, Warmup+Duration). Its server CPU is the samples of
// the goroutines labelled as server's in a CPU profile of the row
// (servercpu.go), over the whole load.
func measure(ctx context.Context, system System, ops []op, cfg Config) Row {
	prof := startCPUProfile(!cfg.NoServerCPU)
	cpu0 := processCPU()
	l := runLoad(ctx, ops, cfg, time.Now())
	cpu := processCPU() - cpu0
	server, profiled := prof.stop()
	if profiled && cfg.RowProfileDir != "" {
		_ = os.WriteFile(rowProfile(cfg, len(ops), system, ""), prof.buf.Bytes(), 0o644) // a diagnostic: the row stands without it
	}
	row := l.row(system, len(ops), cfg)
	if l.done > 0 {
		row.CPUPerTxn = cpu / time.Duration(l.done)
		if profiled {
			row.ServerCPUPerTxn = server / time.Duration(l.done)
		}
	}
	return row
}

// measureOn is measure for a row whose servers run in the server process
// child (nil: in this process, measure). Its server CPU is the child's
// CPU time over the row's window divided by the transactions completed
// in the window; its CPU per transaction adds this process's over the
// same window (the clients'). With Config.RowProfileDir the child writes
// a CPU profile of the row, <clients>-<system>-server.pprof.
func measureOn(ctx context.Context, system System, ops []op, cfg Config, child *serverChild) (Row, error) {
	if child == nil {
		return measure(ctx, system, ops, cfg), nil
	}
	if cfg.RowProfileDir != "" {
		if _, err := child.ask("profile "+rowProfile(cfg, len(ops), system, "-server"), "ok"); err != nil {
			return Row{}, err
		}
	}
	start := time.Now()
	from := start.Add(cfg.Warmup)
	win := make(chan windowCPU, 1)
	go func() { win <- sampleWindow(ctx, child, from, from.Add(cfg.Duration)) }()
	l := runLoad(ctx, ops, cfg, start)
	w := <-win
	if cfg.RowProfileDir != "" {
		if _, err := child.ask("unprofile", "ok"); err != nil {
			return Row{}, err
		}
	}
	if w.err != nil {
		return Row{}, fmt.Errorf("bench: %s: server CPU: %w", system, w.err)
	}
	row := l.row(system, len(ops), cfg)
	row.ServerProcess = true
	if n := time.Duration(len(l.lats)); n > 0 {
		row.ServerCPUPerTxn = w.server / n
		row.CPUPerTxn = (w.server + w.self) / n
	}
	return row, nil
}

// rowProfile is the path of a row's CPU profile in Config.RowProfileDir.
func rowProfile(cfg Config, clients int, system System, suffix string) string {
	return filepath.Join(cfg.RowProfileDir, fmt.Sprintf("%d-%s%s.pprof", clients, system, suffix))
}

// windowCPU is the CPU time a server process (server) and this process
// (self) used in a row's window.
type windowCPU struct {
	server, self time.Duration
	err          error
}

// sampleWindow reads child's and this process's CPU time at from and at
// end (ctx ending first is an error).
func sampleWindow(ctx context.Context, child *serverChild, from, end time.Time) windowCPU {
	var at [2]windowCPU
	for i, t := range []time.Time{from, end} {
		timer := time.NewTimer(time.Until(t))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return windowCPU{err: ctx.Err()}
		}
		server, err := child.cpu()
		if err != nil {
			return windowCPU{err: err}
		}
		at[i] = windowCPU{server: server, self: processCPU()}
	}
	return windowCPU{server: at[1].server - at[0].server, self: at[1].self - at[0].self}
}

// load is what runLoad's clients did.
type load struct {
	lats []time.Duration // of the calls that succeeded inside the window
	errs int             // calls that failed inside the window
	done int             // every call that succeeded, in the window or not
}

// runLoad runs one goroutine per op, each calling its op back to back from
// start until Warmup+Duration after it, and collects the calls that
// completed inside the window [Warmup, Warmup+Duration).
func runLoad(ctx context.Context, ops []op, cfg Config, start time.Time) load {
	var (
		mu sync.Mutex
		l  load
		wg sync.WaitGroup
	)
	from := start.Add(cfg.Warmup)
	end := from.Add(cfg.Duration)
	for _, o := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var bad, ok int
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				opCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := o(opCtx)
				cancel()
				t1 := time.Now()
				if err == nil {
					ok++
				}
				if t1.Before(from) || !t1.Before(end) {
					continue
				}
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, t1.Sub(t0))
			}
			mu.Lock()
			l.lats = append(l.lats, mine...)
			l.errs += bad
			l.done += ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	return l
}

// row summarizes l as system's row with clients clients.
func (l load) row(system System, clients int, cfg Config) Row {
	s := quantile.Summarize(l.lats)
	return Row{System: system, Clients: clients, Txns: len(l.lats), Errors: l.errs,
		TxPerSec: float64(len(l.lats)) / cfg.Duration.Seconds(), Avg: s.Avg, P50: s.P50, P99: s.P99, P999: s.P999}
}
