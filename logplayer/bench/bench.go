// Package bench measures the LogPlayer the way the LogPlayer paper's
// Figures 9 and 10 do (docs/DESIGN.md, "Numbers to beat"):
//
//   - LogPlayer delay: from dispatch (the dispatcher pushes the transaction
//     into the target's queue) to the target receiving it (the target's
//     gRPC server hands the Batch to the target SDK);
//   - apply delay: from the producer's Append call to the target's durable
//     apply (the shard's bbolt transaction, fsync included, has committed);
//
// average, p50 and p99, for a number of targets and a transaction size.
//
// Run starts a 3-node LogStore (logstore/bench.StartCluster: TCP loopback,
// fsync on) unless Config.LogStore names one, and for each row a LogPlayer
// and Targets reference shards (bbolt, fsync on). Without Config.Spawn
// everything runs in this process. With it the LogStore (its 3 nodes in one
// process) and each target run in child processes, closer to the paper
// where they are separate machines: their CPU, garbage collection and
// fsyncs do not share the LogPlayer's Go runtime (a goroutine in fdatasync
// holds one of the runtime's Ps until sysmon retakes it). On the 2-core
// machines of this project that is measured to be slower, not faster: each
// hop between processes wakes another runtime on a possibly idle vCPU, and
// 20 targets still share the two cores. The LogPlayer and the producers
// always run here.
//
// Producers append transactions in a closed loop: a transaction of TxnKB
// key-values of 1 KB (the paper's "10 KB = 10 key-values of 1 KB"), each
// key-value to a uniformly random shard (one slice per shard touched). Each
// message carries its Append call time in a header; a gRPC interceptor on
// each target reads Batch.dispatched_unix_nano as the batch arrives, and a
// wrapper of the target's store notes the time its Apply returned. A batch
// carries the dispatch time of its first delivery, so a later delivery of
// the same batch is charged slightly more than its own delay (at the serial
// default load a batch holds one transaction). Every time is the machine's
// wall clock in Unix nanoseconds, so events of different processes compare.
//
// Where the LogPlayer delay goes (CPU profile, runtime/trace and stage
// timestamps at 20 targets on a 2-core VM): the LogPlayer's own part is
// small: dispatch to the target's sender goroutine taking the batch, p50
// 10-30 µs; taking it, encoding it and handing it to gRPC, p50 5-12 µs. The
// rest is grpc-go's writer goroutine, loopback TCP and the target's gRPC
// reader and receiving goroutine, which a bare stream pays as well (the
// "bare" columns): about 0.15 ms p50 after an idle gap of a few ms on this
// machine, 0.04 ms back to back, 0.07 ms with GOMAXPROCS=1, because each
// goroutine hand-off may wake the other, halted vCPU. With
// 10 KB transactions about 8 of 20 targets receive each transaction and
// their applies (bbolt: page writes and 2 fdatasyncs each) and the
// LogStore's Raft fsyncs take the same two cores, so delay there is mostly
// waiting for a CPU (in one process also for a P, which a goroutine in
// fdatasync holds until sysmon retakes it).
//
// Goroutines: Producers appenders during a row, plus those of the LogStore,
// the LogPlayer and in-process targets; a child process's stdin reader
// (ServeChild).
package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logplayer"
	lsbench "github.com/logplayer/logplayer/logstore/bench"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/types"
)

// sentHeader is the message header holding the Append call time (8 bytes,
// big-endian Unix nanoseconds).
const sentHeader = "bench-sent"

// kvBytes is the payload of one key-value (the paper's 1 KB).
const kvBytes = 1024

// readyTimeout bounds the wait for a row's targets to join the main stream.
const readyTimeout = time.Minute

// Config configures Run. Zero fields take the defaults.
type Config struct {
	// Targets lists the numbers of targets (default 2, 5, 10, 20).
	Targets []int
	// TxnKB lists the transaction sizes in KB, i.e. key-values of 1 KB per
	// transaction (default 1, 10).
	TxnKB []int
	// Duration of each row's measurement (default 3s) after Warmup
	// (default 500ms) of the same load.
	Duration time.Duration
	Warmup   time.Duration
	// Transactions, when > 0, ends each row after that many measured
	// transactions instead of after Duration (go test -bench uses b.N).
	Transactions int
	// Producers is the number of concurrent appenders (default 1: serial
	// load, latency without queueing).
	Producers int
	// LogStore lists the API addresses of a running LogStore; empty starts
	// 3 in-process nodes under Dir.
	LogStore []string
	// Dir holds the in-process LogStore and the shards (default: a new
	// temporary directory, removed afterwards).
	Dir string
	// MemoryTargets replaces the bbolt shards by targets that keep their
	// state in memory (no disk, no fsync): the LogPlayer delay without the
	// targets' disk contention, the apply delay without their fsync.
	MemoryTargets bool
	// Spawn, when set, runs the LogStore (unless LogStore is set) and each
	// target in a child process: Spawn(args...) must return a command that
	// runs ServeChild with args on its stdin and stdout (the CLI: logplayer
	// bench player --child JSON-args). Nil: everything in this process.
	Spawn func(args ...string) *exec.Cmd
	// Logger for every component (default: discard).
	Logger *slog.Logger
	// Group, when > 1, runs that many LogPlayers as members of one group
	// (in this process, on the LogStore's PlayerGroup service) sharing
	// the targets, and after the measurement kills one and measures the
	// failover (group.go). In-process targets only.
	Group int
	// FailoverProfile, when set with Group, receives a CPU profile of the
	// whole process during each failover (from the kill to the last
	// target delivered).
	FailoverProfile string
	// Security, when set, runs every connection over TLS (in-process
	// components only; nil: plaintext).
	Security *lsbench.Security
}

func (c *Config) validate() error {
	if len(c.Targets) == 0 {
		c.Targets = []int{2, 5, 10, 20}
	}
	if len(c.TxnKB) == 0 {
		c.TxnKB = []int{1, 10}
	}
	for _, n := range append(slices.Clone(c.Targets), c.TxnKB...) {
		if n <= 0 {
			return fmt.Errorf("bench: targets and sizes must be > 0, got %d", n)
		}
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = 500 * time.Millisecond
	}
	if c.Transactions < 0 {
		return fmt.Errorf("bench: negative transaction count %d", c.Transactions)
	}
	if c.Producers <= 0 {
		c.Producers = 1
	}
	if c.Group < 0 || c.Group > 1 && c.Spawn != nil {
		return fmt.Errorf("bench: a group (%d members) runs in-process targets only, not with child processes", c.Group)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Stats summarises one delay distribution.
type Stats struct {
	N             int
	Avg, P50, P99 time.Duration
}

// Row is one measured configuration.
type Row struct {
	Targets int
	TxnKB   int
	// Txns is the number of measured transactions, TxPerSec their rate.
	Txns     int
	TxPerSec float64
	// Append is the producer's Append latency (LogStore commit).
	Append Stats
	// Player is the LogPlayer delay (dispatch to target received), one
	// sample per transaction and target.
	Player Stats
	// Apply is the apply delay (Append call to durable apply), one sample
	// per transaction and target.
	Apply Stats
	// Bare is the reference stream's delay during the row (bare.go).
	Bare Stats
	// Members is the number of LogPlayers delivering (1, or Config.Group).
	Members int
	// AppendErrors counts the producers' Appends that failed with a
	// transient error (a leader change) during the row; the load went on.
	AppendErrors int64
	// HeapIdle and HeapLoad are the heap in use after GC per target, with
	// every target ready and idle, and at the end of the measured load;
	// RSSIdle and RSSLoad the same of the process's RSS (scale.go).
	HeapIdle, HeapLoad int64
	RSSIdle, RSSLoad   int64
	// CPUPerTxn is the LogPlayer's CPU per measured transaction (0 when
	// not measured: a CPU profile was already running).
	CPUPerTxn time.Duration
	// Failover, with Members > 1: one member was killed (group.go).
	Failover *Failover
}

// Table is Run's result.
type Table struct {
	Producers     int
	MemoryTargets bool
	Processes     bool // Config.Spawn was set
	Rows          []Row
}

// String formats the table as Markdown.
func (t Table) String() string {
	var b strings.Builder
	targets := "bbolt shards, fsync on"
	if t.MemoryTargets {
		targets = "in-memory targets, no disk"
	}
	where := "LogStore, LogPlayer and targets in one process"
	if t.Processes {
		where = "LogStore (3 nodes) and each target in its own process, LogPlayer and producers in another"
	}
	fmt.Fprintf(&b, "LogPlayer delay = dispatch -> target received; apply delay = Append call -> apply at the target "+
		"(%s; LogStore fsync on; %d producer(s); %s)\n\n", targets, t.Producers, where)
	b.WriteString("| targets | txn | tx/s | append p50 | player avg | player p50 | player p99 | bare p50 | bare p99 | apply avg | apply p50 | apply p99 | samples |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "| %d | %d KB | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Targets, r.TxnKB, r.TxPerSec,
			ms(r.Append.P50), ms(r.Player.Avg), ms(r.Player.P50), ms(r.Player.P99), ms(r.Bare.P50), ms(r.Bare.P99),
			ms(r.Apply.Avg), ms(r.Apply.P50), ms(r.Apply.P99), r.Player.N)
	}
	fmt.Fprintf(&b, "\nbare p50/p99: during each row, a bare gRPC Deliver stream in the LogPlayer's process (no LogPlayer, "+
		"no target SDK) sends one 1 KB delivery every %v; Send to the server's Recv. What any gRPC delivery pays on this machine under this load.\n", bareGap)
	t.writeScale(&b)
	return b.String()
}

// writeScale appends the per-target cost table (issue 13 part 5) and the
// failovers of group rows.
func (t Table) writeScale(b *strings.Builder) {
	b.WriteString("\nPer-target cost: heap in use after GC and RSS, delta from before the LogPlayer(s) started, divided by targets " +
		"(idle: every target ready, no load; load: at the end of the measured window); LogPlayer CPU per transaction from a CPU profile " +
		"of the window (the LogPlayer's goroutines by label); player p50 / bare p50; append errors: Appends of the row (warmup included) " +
		"that failed with UNAVAILABLE or DEADLINE_EXCEEDED (a leader change), after which the load went on.\n\n")
	b.WriteString("| targets | players | txn | heap/target idle | heap/target load | RSS/target idle | RSS/target load | player CPU/txn | player p50 | bare p50 | ratio p50 | player p99 | bare p99 | append errors |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range t.Rows {
		ratio := "-"
		if r.Bare.P50 > 0 {
			ratio = fmt.Sprintf("%.2f", float64(r.Player.P50)/float64(r.Bare.P50))
		}
		fmt.Fprintf(b, "| %d | %d | %d KB | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Targets, max(1, r.Members), r.TxnKB,
			kib(r.HeapIdle), kib(r.HeapLoad), kib(r.RSSIdle), kib(r.RSSLoad), us(r.CPUPerTxn),
			ms(r.Player.P50), ms(r.Bare.P50), ratio, ms(r.Player.P99), ms(r.Bare.P99), r.AppendErrors)
	}
	var fo []Row
	for _, r := range t.Rows {
		if r.Failover != nil {
			fo = append(fo, r)
		}
	}
	if len(fo) == 0 {
		return
	}
	b.WriteString("\nFailover: one member killed under load (LogStore connections cut, no LeaveGroup); owned = until the others hold " +
		"all its targets connected in state N, delivered = until each of them applied beyond the LogStore head at the kill.\n\n")
	b.WriteString("| targets | players | txn | targets moved | lease | owned | delivered | delivered / lease |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range fo {
		f := r.Failover
		ratio := "-"
		if f.Lease > 0 {
			ratio = fmt.Sprintf("%.2f", float64(f.Delivered)/float64(f.Lease))
		}
		fmt.Fprintf(b, "| %d | %d | %d KB | %d | %s | %s | %s | %s |\n", r.Targets, r.Members, r.TxnKB, f.Targets,
			f.Lease.Round(time.Millisecond), f.Owned.Round(time.Millisecond), f.Delivered.Round(time.Millisecond), ratio)
	}
}

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

func us(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// Run measures every (targets, size) row. ctx cancels between and within
// rows.
func Run(ctx context.Context, cfg Config) (Table, error) {
	if err := cfg.validate(); err != nil {
		return Table{}, err
	}
	env, err := newEnv(cfg)
	if err != nil {
		return Table{}, err
	}
	defer env.close()
	table := Table{Producers: cfg.Producers, MemoryTargets: cfg.MemoryTargets, Processes: cfg.Spawn != nil}
	for _, kb := range cfg.TxnKB {
		for _, n := range cfg.Targets {
			row, err := env.row(ctx, n, kb)
			if err != nil {
				return table, fmt.Errorf("bench: %d targets, %d KB: %w", n, kb, err)
			}
			table.Rows = append(table.Rows, row)
		}
	}
	return table, nil
}

// RunReport runs cfg's rows (Run) and prints the table on w; with tls,
// plaintext and then over mutual TLS (logstore/bench.WithTLS, log is its).
// A failed row keeps the rows measured before it: they are printed and
// the error returned.
func RunReport(ctx context.Context, w io.Writer, log *slog.Logger, cfg Config, tls bool) error {
	return lsbench.WithTLS(w, log, tls, func(sec *lsbench.Security) error {
		cfg.Security = sec
		t, err := Run(ctx, cfg)
		if err != nil && len(t.Rows) == 0 {
			return err
		}
		_, perr := fmt.Fprint(w, t.String())
		return errors.Join(err, perr)
	})
}

// Env is a LogStore and a client, shared by rows (exported for the go test
// -bench wrapper, which runs one row per sub-benchmark).
type Env struct {
	cfg     Config
	dir     string
	rmDir   bool
	cluster *lsbench.Cluster // in-process LogStore
	store   *child           // LogStore child process
	addrs   []string
	cl      *client.Client
	rows    int
}

// NewEnv starts (or connects to) the LogStore of cfg.
func NewEnv(cfg Config) (*Env, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newEnv(cfg)
}

func newEnv(cfg Config) (*Env, error) {
	e := &Env{cfg: cfg, dir: cfg.Dir, addrs: cfg.LogStore}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "logplayer-bench-")
		if err != nil {
			return nil, err
		}
		e.dir, e.rmDir = d, true
	}
	switch {
	case len(e.addrs) > 0:
	case cfg.Spawn != nil:
		c, addrs, err := startChild(cfg.Spawn, "--role", "logstore", "--dir", filepath.Join(e.dir, "logstore"))
		if err != nil {
			e.close()
			return nil, err
		}
		e.store, e.addrs = c, strings.Split(addrs, ",")
	default:
		c, err := lsbench.StartClusterSecure(filepath.Join(e.dir, "logstore"), cfg.Logger, cfg.Security)
		if err != nil {
			e.close()
			return nil, err
		}
		e.cluster, e.addrs = c, c.APIAddrs()
	}
	cl, err := client.New(client.Config{Addrs: e.addrs, Logger: cfg.Logger, DialOptions: cfg.dialOptions()})
	if err != nil {
		e.close()
		return nil, err
	}
	e.cl = cl
	return e, nil
}

// Close stops what NewEnv started.
func (e *Env) Close() { e.close() }

func (e *Env) close() {
	if e.cl != nil {
		_ = e.cl.Close()
	}
	if e.cluster != nil {
		e.cluster.Close()
	}
	if e.store != nil {
		e.store.stop()
	}
	if e.rmDir {
		_ = os.RemoveAll(e.dir)
	}
}

// Row measures one configuration with a fresh LogPlayer and fresh shards.
func (e *Env) Row(ctx context.Context, targets, txnKB int) (Row, error) {
	return e.row(ctx, targets, txnKB)
}

func (e *Env) row(ctx context.Context, nTargets, kb int) (Row, error) {
	e.rows++
	rec := &recorder{}
	var shards []benchTarget
	defer func() {
		for _, s := range shards {
			s.close()
		}
	}()
	var tcs []logplayer.TargetConfig
	for i := range nTargets {
		// Topics are new in each row, so a row's shards recover nothing of
		// the earlier rows' transactions.
		id := fmt.Sprintf("r%d-shard-%d", e.rows, i)
		s, err := e.startTarget(filepath.Join(e.dir, id), id, rec)
		if err != nil {
			return Row{}, err
		}
		shards = append(shards, s)
		tcs = append(tcs, logplayer.TargetConfig{ID: id, Address: s.address(), Topics: []string{id}})
	}
	members := max(1, e.cfg.Group)
	if members > 1 {
		if err := e.waitClusterVersion(ctx); err != nil {
			return Row{}, err
		}
	}
	base := snapMem()
	var ps []*playerRun
	defer func() {
		for _, p := range ps {
			p.stop()
		}
		if members > 1 {
			// The registry is the LogStore's, not the group's: the next
			// row's group would be assigned these targets too.
			e.unregister(tcs)
		}
	}()
	// The first LogPlayer (a group's registrar) takes every target, then
	// the other members join and take their shares.
	for i := range members {
		p, err := e.startPlayer(ctx, i, tcs)
		if err != nil {
			return Row{}, err
		}
		ps = append(ps, p)
		if err := waitReady(ctx, ps, nTargets); err != nil {
			return Row{}, err
		}
	}
	idle := snapMem()

	load := &producers{cl: e.cl, topics: topicsOf(tcs), kb: kb}
	if err := load.run(ctx, e.cfg.Producers, e.cfg.Warmup, 0, nil); err != nil {
		return Row{}, err
	}
	bare, err := startBare(ctx)
	if err != nil {
		return Row{}, err
	}
	prof := startCPU()
	start := time.Now()
	appendLat := &samples{}
	err = load.run(ctx, e.cfg.Producers, e.cfg.Duration, e.cfg.Transactions, appendLat)
	end := time.Now()
	cpuNanos, cpuErr := prof.stop()
	bareStats, bareErr := bare.stop()
	if err = errors.Join(err, bareErr, cpuErr); err != nil {
		return Row{}, err
	}
	loaded := snapMem()
	elapsed := end.Sub(start)
	// Wait until every target applied what was appended, so every sample is in.
	head := load.lastLSN()
	wctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, s := range shards {
		if err := s.drain(wctx, head, rec); err != nil {
			return Row{}, err
		}
	}
	n := appendLat.len()
	player, apply := rec.stats(start.UnixNano(), end.UnixNano())
	row := Row{
		Targets: nTargets, TxnKB: kb, Txns: n, TxPerSec: float64(n) / elapsed.Seconds(),
		Append: appendLat.stats(), Player: player, Apply: apply, Bare: bareStats, Members: members,
		AppendErrors: load.failed.Load(),
	}
	row.HeapIdle, row.RSSIdle = idle.perTarget(base, nTargets)
	row.HeapLoad, row.RSSLoad = loaded.perTarget(base, nTargets)
	if prof != nil && n > 0 {
		row.CPUPerTxn = time.Duration(cpuNanos / int64(n))
	}
	if members > 1 {
		if err := e.failover(ctx, &row, ps, shards, load); err != nil {
			return row, err
		}
	}
	return row, nil
}

// startTarget starts target id with its data in dir, in a child process when
// the configuration says so.
func (e *Env) startTarget(dir, id string, rec *recorder) (benchTarget, error) {
	if e.cfg.Spawn != nil {
		return startProcTarget(e.cfg.Spawn, dir, id, e.cfg.MemoryTargets)
	}
	return startLocalTarget(dir, id, e.cfg.MemoryTargets, rec, e.cfg)
}

// dialOptions are the clients' Security options (nil: plaintext).
func (c Config) dialOptions() []grpc.DialOption {
	if c.Security == nil {
		return nil
	}
	return c.Security.DialOptions
}

func topicsOf(tcs []logplayer.TargetConfig) []string {
	var out []string
	for _, tc := range tcs {
		out = append(out, tc.Topics...)
	}
	return out
}

// producers append transactions of kb key-values of 1 KB.
type producers struct {
	cl     *client.Client
	topics []string
	kb     int
	mu     sync.Mutex
	last   types.LSN
	// failed counts the Appends that failed with a transient error and
	// were not retried (the load went on with the next transaction).
	failed atomic.Int64
}

// maxAppendErrors bounds the transient Append errors a row tolerates.
const maxAppendErrors = 100

// transient: an Append error of the LogStore's availability (a leader
// change, a deadline), not of the request.
func transient(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}

func (p *producers) lastLSN() types.LSN { p.mu.Lock(); defer p.mu.Unlock(); return p.last }

// run appends with n concurrent producers for d, or until count
// transactions were appended when count > 0; lat receives each Append's
// latency.
func (p *producers) run(ctx context.Context, n int, d time.Duration, count int, lat *samples) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	issued := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			value := make([]byte, kvBytes)
			for ctx.Err() == nil {
				mu.Lock()
				if count > 0 && issued >= count || count == 0 && time.Now().After(end) {
					mu.Unlock()
					return
				}
				issued++
				mu.Unlock()
				req, sent := p.txn(rng, value)
				t0 := time.Now()
				binary.BigEndian.PutUint64(sent, uint64(t0.UnixNano()))
				resp, err := p.cl.Append(ctx, req)
				if err != nil && ctx.Err() == nil && transient(err) && p.failed.Add(1) <= maxAppendErrors {
					continue // a leader change on a loaded machine: the next transaction (this one may have committed)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				if lat != nil {
					lat.add(time.Since(t0))
				}
				p.mu.Lock()
				p.last = max(p.last, types.LSN(resp.Lsn))
				p.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// txn builds one transaction: kb key-values of 1 KB on random shards. Every
// message's sentHeader shares sent, which the caller fills just before the
// Append.
func (p *producers) txn(rng *rand.Rand, value []byte) (req *logstorepb.AppendRequest, sent []byte) {
	bySlice := map[string]*logstorepb.Slice{}
	req = &logstorepb.AppendRequest{}
	sent = make([]byte, 8)
	for range p.kb {
		topic := p.topics[rng.IntN(len(p.topics))]
		s := bySlice[topic]
		if s == nil {
			s = &logstorepb.Slice{Topic: topic}
			bySlice[topic] = s
			req.Slices = append(req.Slices, s)
		}
		key := fmt.Appendf(nil, "k%d", rng.IntN(1000))
		s.Messages = append(s.Messages, &logstorepb.Message{
			Value:   shard.EncodePut(key, value[:kvBytes-len(key)-8]),
			Headers: []*logstorepb.Header{{Key: sentHeader, Value: sent}},
		})
	}
	return req, sent
}

// samples is a list of durations safe for concurrent add.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *samples) add(d time.Duration) { s.mu.Lock(); s.d = append(s.d, d); s.mu.Unlock() }
func (s *samples) len() int            { s.mu.Lock(); defer s.mu.Unlock(); return len(s.d) }

func (s *samples) stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return statsOf(slices.Clone(s.d))
}
