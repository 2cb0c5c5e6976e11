// Package bench measures LogStore commit latency and throughput against
// bare hashicorp/raft on the same machine, in the same run (DESIGN.md §10).
//
// Run starts 3 in-process LogStore nodes (TCP on 127.0.0.1, raft-boltdb
// with fsync on, the segment log) and 3 bare rafts (raft-boltdb, TCP
// transport, no-op FSM). For each concurrency level it drives the LogStore
// with that many client goroutines, each doing one Append at a time through
// the gRPC client (a txn of Topics topics × one SliceBytes message), then
// the bare rafts the same way with raft.Apply of a payload of the same
// size: the two rows of a level run back to back, so they share the
// machine's conditions (a shared machine drifts a lot over a whole run).
// Rows report tx/s, p50/p99/p99.9 latency and, for the LogStore, the
// transactions per Raft entry the aggregator achieved; Table.String puts
// both systems of a level on one line with the LogStore/bare ratios the
// goals are stated in.
//
// Goroutines: one per simulated client during a row; the nodes' own.
package bench

import (
	"context"
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
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/internal/raftlog"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Config configures Run. Zero fields get the defaults.
type Config struct {
	// Clients lists the concurrency levels (default 1, 10, 64, 256).
	Clients []int
	// Duration of each row's measurement (default 3s), after Warmup
	// (default 300ms) of the same load.
	Duration time.Duration
	Warmup   time.Duration
	// Topics per transaction (default 2) and bytes per slice (default 256).
	Topics     int
	SliceBytes int
	// Dir is where the nodes' data goes (default: a new temp dir, removed
	// after the run).
	Dir string
	// SkipBareRaft leaves out the reference rows.
	SkipBareRaft bool
	// PlainAppends makes the client send each transaction in an Append
	// call of its own instead of coalescing concurrent ones into
	// AppendBatch calls (client.Config.MaxBatchBytes < 0).
	PlainAppends bool
	// Logger for the nodes (default: discard).
	Logger *slog.Logger
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

// System names of Row.System.
const (
	SystemLogStore = "logstore"
	SystemBareRaft = "bare raft"
)

// Row is one measured system and concurrency.
type Row struct {
	System   string
	Clients  int
	Txns     int
	Errors   int
	TxPerSec float64
	P50      time.Duration
	P99      time.Duration
	P999     time.Duration
	// TxnsPerEntry is the mean number of transactions per Raft entry the
	// aggregator wrote during the row (LogStore rows; 0 for bare raft, one
	// Apply per entry).
	TxnsPerEntry float64
	// AppendsPerCall is the mean number of transactions per gRPC call
	// (Append or AppendBatch) the leader served during the row.
	AppendsPerCall float64
}

// Table is Run's result.
type Table struct {
	Rows []Row
}

// Goals of DESIGN.md §10, stated as LogStore/bare raft ratios within one
// run.
const (
	// GoalSerialP50Ratio: with 1 client, the LogStore p50 at most this
	// times bare raft's.
	GoalSerialP50Ratio = 1.2
	// GoalThroughputRatio: with GoalThroughputClients or more clients, the
	// LogStore's tx/s at least this times bare raft's.
	GoalThroughputRatio   = 4.0
	GoalThroughputClients = 10
)

// String formats the table as Markdown: one line per concurrency level with
// both systems and the LogStore/bare ratios, each marked against its goal.
func (t Table) String() string {
	var b strings.Builder
	b.WriteString("| clients | logstore tx/s | bare raft tx/s | tx/s logstore/bare | logstore p50 / p99 / p99.9 | bare raft p50 / p99 / p99.9 | p50 logstore/bare | txns per call | txns per entry | errors |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, n := range t.levels() {
		ls, lsOK := t.row(SystemLogStore, n)
		br, brOK := t.row(SystemBareRaft, n)
		cell := func(ok bool, f func() string) string {
			if !ok {
				return "–"
			}
			return f()
		}
		tput := cell(lsOK && brOK && br.TxPerSec > 0, func() string {
			r := ls.TxPerSec / br.TxPerSec
			if n >= GoalThroughputClients {
				return fmt.Sprintf("%.2f× %s", r, mark(r >= GoalThroughputRatio))
			}
			return fmt.Sprintf("%.2f×", r)
		})
		lat := cell(lsOK && brOK && br.P50 > 0, func() string {
			r := float64(ls.P50) / float64(br.P50)
			if n == 1 {
				return fmt.Sprintf("%.2f× %s", r, mark(r <= GoalSerialP50Ratio))
			}
			return fmt.Sprintf("%.2f×", r)
		})
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n,
			cell(lsOK, func() string { return fmt.Sprintf("%.0f", ls.TxPerSec) }),
			cell(brOK, func() string { return fmt.Sprintf("%.0f", br.TxPerSec) }),
			tput,
			cell(lsOK, func() string { return latencies(ls) }),
			cell(brOK, func() string { return latencies(br) }),
			lat,
			cell(lsOK, func() string { return fmt.Sprintf("%.1f", ls.AppendsPerCall) }),
			cell(lsOK, func() string { return fmt.Sprintf("%.1f", ls.TxnsPerEntry) }),
			fmt.Sprint(ls.Errors+br.Errors))
	}
	fmt.Fprintf(&b, "\nGoals (DESIGN.md §10): 1 client p50 at most %.1f× bare raft's; %d or more clients at least %.0f× its tx/s (ok: met, MISS: not met in this run).\n",
		GoalSerialP50Ratio, GoalThroughputClients, GoalThroughputRatio)
	return b.String()
}

func mark(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISS"
}

func latencies(r Row) string {
	return fmt.Sprintf("%s / %s / %s", fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P999))
}

// levels returns the client counts of the rows, in first-seen order.
func (t Table) levels() []int {
	var out []int
	for _, r := range t.Rows {
		if !slices.Contains(out, r.Clients) {
			out = append(out, r.Clients)
		}
	}
	return out
}

// row returns system's row for clients.
func (t Table) row(system string, clients int) (Row, bool) {
	for _, r := range t.Rows {
		if r.System == system && r.Clients == clients {
			return r, true
		}
	}
	return Row{}, false
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// Run measures, for each concurrency level, the LogStore and then bare
// raft. ctx cancels between rows.
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
	var table Table
	ls, err := StartCluster(filepath.Join(dir, "logstore"), cfg.Logger)
	if err != nil {
		return table, err
	}
	defer ls.Close()
	appendOnce, closeClient, err := appendOp(ls, cfg)
	if err != nil {
		return table, err
	}
	defer closeClient()
	var applyOnce func(context.Context) error
	if !cfg.SkipBareRaft {
		br, err := startBareRaft(filepath.Join(dir, "raft"), cfg.Logger)
		if err != nil {
			return table, err
		}
		defer br.close()
		payload := make([]byte, cfg.Topics*cfg.SliceBytes)
		applyOnce = func(ctx context.Context) error {
			return br.leader().Apply(payload, 10*time.Second).Error()
		}
	}
	for _, n := range cfg.Clients {
		if err := ctx.Err(); err != nil {
			return table, err
		}
		before := ls.batchStats()
		row := measure(ctx, SystemLogStore, n, cfg, appendOnce)
		row.TxnsPerEntry, row.AppendsPerCall = ls.batchStats().since(before)
		table.Rows = append(table.Rows, row)
		if applyOnce != nil && ctx.Err() == nil {
			table.Rows = append(table.Rows, measure(ctx, SystemBareRaft, n, cfg, applyOnce))
		}
	}
	return table, ctx.Err()
}

// appendOp returns one Append of cfg's shape through a client of c.
func appendOp(c *Cluster, cfg Config) (func(context.Context) error, func(), error) {
	ccfg := client.Config{Addrs: c.APIAddrs(), Logger: cfg.Logger}
	if cfg.PlainAppends {
		ccfg.MaxBatchBytes = -1
	}
	cl, err := client.New(ccfg)
	if err != nil {
		return nil, nil, err
	}
	req := &logstorepb.AppendRequest{}
	for i := range cfg.Topics {
		req.Slices = append(req.Slices, &logstorepb.Slice{Topic: fmt.Sprintf("bench-%d", i),
			Messages: []*logstorepb.Message{{Value: make([]byte, cfg.SliceBytes)}}})
	}
	op := func(ctx context.Context) error {
		_, err := cl.Append(ctx, req)
		return err
	}
	return op, func() { cl.Close() }, nil
}

// measure runs clients goroutines calling op back to back for warmup then
// duration, and summarizes the measured calls.
func measure(ctx context.Context, system string, clients int, cfg Config, op func(context.Context) error) Row {
	var (
		mu    sync.Mutex
		lats  []time.Duration
		errs  int
		wg    sync.WaitGroup
		start = time.Now()
	)
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var bad int
			for {
				t0 := time.Now()
				if t0.After(end) || ctx.Err() != nil {
					break
				}
				opCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := op(opCtx)
				cancel()
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			errs += bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(measureFrom)
	s := quantile.Summarize(lats)
	return Row{System: system, Clients: clients, Txns: len(lats), Errors: errs,
		TxPerSec: float64(len(lats)) / elapsed.Seconds(), P50: s.P50, P99: s.P99, P999: s.P999}
}

// Cluster is 3 in-process LogStore nodes on loopback.
type Cluster struct {
	Nodes  []*logstore.Node
	regs   []*prometheus.Registry // the nodes' metrics
	stores []*serve.Store         // the served nodes, parallel to Nodes
}

// batches sums the leaders' aggregation and AppendBatch histograms.
type batches struct {
	txns, entries         float64 // logstore_aggregation_batch_txns: sum, count
	batchReqs, batchCalls float64 // logstore_append_batch_requests: sum, count
}

// batchStats sums the histograms over the nodes (only leaders write
// entries and serve appends).
func (c *Cluster) batchStats() batches {
	var out batches
	for _, reg := range c.regs {
		mfs, err := reg.Gather()
		if err != nil {
			continue
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				switch mf.GetName() {
				case "logstore_aggregation_batch_txns":
					out.txns += h.GetSampleSum()
					out.entries += float64(h.GetSampleCount())
				case "logstore_append_batch_requests":
					out.batchReqs += h.GetSampleSum()
					out.batchCalls += float64(h.GetSampleCount())
				}
			}
		}
	}
	return out
}

// since returns transactions per Raft entry and per Append/AppendBatch
// call between before and b (every command of the bench is an Append).
func (b batches) since(before batches) (perEntry, perCall float64) {
	txns, entries := b.txns-before.txns, b.entries-before.entries
	batched, batchCalls := b.batchReqs-before.batchReqs, b.batchCalls-before.batchCalls
	if entries > 0 {
		perEntry = txns / entries
	}
	if calls := batchCalls + (txns - batched); calls > 0 {
		perCall = txns / calls
	}
	return perEntry, perCall
}

// StartCluster starts 3 bootstrapped nodes under dir with default settings
// (fsync on) and waits for a leader.
func StartCluster(dir string, logger *slog.Logger) (*Cluster, error) {
	var peers []logstore.Peer
	var rls, als []net.Listener
	closeAll := func() {
		for _, l := range append(rls, als...) {
			l.Close()
		}
	}
	for i := range 3 {
		rl, err1 := net.Listen("tcp", "127.0.0.1:0")
		al, err2 := net.Listen("tcp", "127.0.0.1:0")
		if err := errors.Join(err1, err2); err != nil {
			closeAll()
			return nil, err
		}
		rls, als = append(rls, rl), append(als, al)
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()})
	}
	c := &Cluster{}
	for i, p := range peers {
		reg := prometheus.NewRegistry()
		st, err := serve.StartStore(logstore.Config{
			ID: p.ID, Dir: filepath.Join(dir, p.ID), RaftAddr: p.RaftAddr, APIAddr: p.APIAddr,
			RaftListener: rls[i], Bootstrap: peers, Logger: logger,
			Registry: reg,
			// The bare-raft reference rows run on raft-boltdb: the
			// LogStore runs on the same backend so the ratios compare
			// like with like (rows on raft-wal, the node default, are
			// issue 11's benchmark work).
			RaftLogStore: logstore.RaftLogBoltDB,
		}, als[i], "", logger)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes, c.regs, c.stores = append(c.Nodes, st.Node), append(c.regs, reg), append(c.stores, st)
	}
	if err := testwait.Until(60*time.Second, "a LogStore leader", func() bool {
		for _, n := range c.Nodes {
			if n.IsLeader() {
				return true
			}
		}
		return false
	}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: no leader: %w", err)
	}
	return c, nil
}

// APIAddrs returns the nodes' gRPC addresses.
func (c *Cluster) APIAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.APIAddr())
	}
	return out
}

// Close stops every node (its API server first).
func (c *Cluster) Close() {
	for _, st := range c.stores {
		st.Close()
	}
}

// bareRaft is 3 hashicorp/raft instances with raft-boltdb, TCP transport
// and a no-op FSM: the reference.
type bareRaft struct {
	rafts  []*raft.Raft
	stores []*raftboltdb.BoltStore
	trans  []*raft.NetworkTransport
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnap{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnap struct{}

func (nopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnap) Release()                          {}

func startBareRaft(dir string, logger *slog.Logger) (*bareRaft, error) {
	b := &bareRaft{}
	hl := raftlog.New(logger, 0)
	var servers []raft.Server
	for i := range 3 {
		t, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 10*time.Second, hl)
		if err != nil {
			b.close()
			return nil, err
		}
		b.trans = append(b.trans, t)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("r%d", i)), Address: t.LocalAddr()})
	}
	for i := range 3 {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprint(i)), 0o755); err != nil {
			b.close()
			return nil, err
		}
		st, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, fmt.Sprint(i), "raft.db")})
		if err != nil {
			b.close()
			return nil, err
		}
		b.stores = append(b.stores, st)
		rc := raft.DefaultConfig()
		rc.LocalID = servers[i].ID
		rc.Logger = hl
		r, err := raft.NewRaft(rc, nopFSM{}, st, st, raft.NewDiscardSnapshotStore(), b.trans[i])
		if err != nil {
			b.close()
			return nil, err
		}
		b.rafts = append(b.rafts, r)
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			b.close()
			return nil, err
		}
	}
	if err := testwait.Until(60*time.Second, "a bare raft leader", func() bool { return b.leader().State() == raft.Leader }); err != nil {
		b.close()
		return nil, fmt.Errorf("bench: bare raft has no leader: %w", err)
	}
	return b, nil
}

func (b *bareRaft) leader() *raft.Raft {
	for _, r := range b.rafts {
		if r.State() == raft.Leader {
			return r
		}
	}
	return b.rafts[0] // Apply answers ErrNotLeader: counted as an error
}

func (b *bareRaft) close() {
	for _, r := range b.rafts {
		r.Shutdown().Error()
	}
	for _, t := range b.trans {
		t.Close()
	}
	for _, s := range b.stores {
		s.Close()
	}
}
