// Package sqlbench measures the SQL sink (target/sqlstore's Mapping behind
// the target SDK, fed by a LogPlayer) against a bare loader writing the same
// rows to the same PostgreSQL in the same run.
//
// For each row size and batch size (rows per transaction):
//
//   - bare: one connection writes batches of that many rows with COPY, one
//     SQL transaction per batch, in a closed loop: rows/s and the p50 of one
//     batch's transaction (BEGIN, COPY, COMMIT: "bare commit");
//   - sink: a 3-node LogStore (in this process, fsync on), a LogPlayer and a
//     sink target (sqlstore.Store with the built-in Mapping, append mode) on
//     loopback; Producers producers append transactions of that many
//     messages of that size to one topic in a closed loop. Rows/s is the
//     rows that became visible in the sink's table during the window; the
//     end-to-end latency of a transaction is from its Append's
//     acknowledgement to its row being visible to a query on another
//     connection (a poller reads the newest row's lsn in a tight loop, one
//     query at a time: its resolution is one query, printed); append p50 is the
//     producers' Append latency.
//
// The goals printed under the table (issue 25): sink rows/s at least 0.8×
// bare with 1 KB rows; end-to-end p50 within append p50 + 2× bare commit p50
// (also against the bare commit measured beside the running sink, by a
// probe transaction every 20ms: the bare commit under the sink's load). A
// second table splits the end-to-end latency at each hop (Stages): a gRPC
// stream interceptor on the target's server and a wrapper around the
// Store note when each LSN was received and applied.
//
// Goroutines, during a row: the producers, the poller, the probe, the
// LogPlayer's, the target server's and the LogStore nodes'. Nothing
// outlives Run.
package sqlbench

import (
	"context"
	"crypto/rand"
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
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/logplayer"
	lsbench "github.com/logplayer/logplayer/logstore/bench"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/types"
)

// Config configures Run.
type Config struct {
	// DSN is the PostgreSQL database written to. Required.
	DSN string
	// RowBytes are the value sizes measured (default 100, 1024).
	RowBytes []int
	// BatchRows are the rows per transaction measured (default 1, 10, 100).
	BatchRows []int
	// Duration is each measurement window (default 3s); Warmup runs before
	// it (default 500ms).
	Duration, Warmup time.Duration
	// Producers is the number of concurrent appenders (default 8).
	Producers int
	// Rate, when positive, paces the producers to that many transactions
	// per second in all (each waits Producers/Rate between the starts of
	// its Appends) instead of a closed loop: the end-to-end latency at a
	// load below the sink's commit rate, where a group commit holds one
	// transaction.
	Rate float64
	// Logger defaults to discarding.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.DSN == "" {
		return errors.New("sqlbench: DSN is empty")
	}
	if len(c.RowBytes) == 0 {
		c.RowBytes = []int{100, 1024}
	}
	if len(c.BatchRows) == 0 {
		c.BatchRows = []int{1, 10, 100}
	}
	if c.Duration <= 0 {
		c.Duration = 3 * time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = 500 * time.Millisecond
	}
	if c.Producers <= 0 {
		c.Producers = 8
	}
	if c.Rate < 0 {
		return fmt.Errorf("sqlbench: negative rate %v", c.Rate)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, n := range append(slices.Clone(c.RowBytes), c.BatchRows...) {
		if n <= 0 {
			return fmt.Errorf("sqlbench: sizes must be positive, got %d", n)
		}
	}
	return nil
}

// Row is one measured configuration.
type Row struct {
	RowBytes, BatchRows int
	BareRowsPerSec      float64
	BareCommitP50       time.Duration
	SinkRowsPerSec      float64
	AppendRowsPerSec    float64 // rows the producers got acknowledged
	AppendP50           time.Duration
	// SinkApplyP50 is the sink's Store.Apply (its whole SQL transaction:
	// lock the state row, COPY, update it, COMMIT) for one group commit.
	SinkApplyP50   time.Duration
	E2EP50, E2EP99 time.Duration
	E2ESamples     int
	// BareCommitBesideP50 is the bare loader's transaction of the same
	// rows, one every 20ms on its own connection while the sink runs:
	// the bare commit under the sink's load.
	BareCommitBesideP50 time.Duration
	// Stages is the end-to-end latency split at each hop (see Stages).
	Stages Stages
}

// Stages are p50s of the hops of one transaction's end-to-end latency,
// every timestamp taken in this process on one clock (time.Now):
//
//   - AckToDispatch: the Append's acknowledgement to the LogPlayer's
//     dispatch loop getting the transaction from its follow stream (the
//     Batch's dispatched_unix_nano, set when the fetcher's Follow hands the
//     transaction to the dispatcher; negative when the follow stream was
//     faster than the producer's acknowledgement). Only transactions that
//     were first in their Batch (the Batch carries the first one's time)
//     are sampled, for every hop;
//   - DispatchToRecv: dispatch to the target's gRPC stream receiving the
//     Batch that holds it (the LogPlayer's queue, sender window, gRPC);
//   - RecvToApply: received to the start of the Store.Apply that holds it
//     (the target's queue: waiting for the group commit before it);
//   - Apply: that Store.Apply (the SQL transaction through COMMIT);
//   - CommitToSeen: COMMIT returned to the poller seeing it on its own
//     connection (the poller's resolution, PollP50 per query).
//
// Each hop has its p50 and its mean: the means add up to the mean
// end-to-end latency of the same samples (E2EMean), the p50s do not.
type Stages struct {
	AckToDispatch, DispatchToRecv, RecvToApply, Apply, CommitToSeen Hop
	E2EMean, PollP50                                                time.Duration
	Samples                                                         int
	// TxnsPerApply is the mean of the transactions (deliveries with
	// slices, not progress markers) one Store.Apply held: the target
	// SDK's group commit.
	TxnsPerApply float64
}

// Hop is one stage's p50 and mean.
type Hop struct{ P50, Mean time.Duration }

func hopOf(ds []time.Duration) Hop {
	if len(ds) == 0 {
		return Hop{}
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Hop{P50: quantile.Of(ds, 0.5), Mean: sum / time.Duration(len(ds))}
}

func (h Hop) String() string { return ms(h.P50) + " / " + ms(h.Mean) }

// Table is Run's result.
type Table []Row

// String renders t as Markdown with the goals.
func (t Table) String() string {
	var b strings.Builder
	b.WriteString("| row bytes | rows/txn | bare rows/s | bare commit p50 | sink rows/s | sink/bare | appended rows/s | append p50 | sink apply p50 | e2e p50 | e2e p99 | e2e goal (append p50 + 2× bare commit p50) |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range t {
		goal := r.AppendP50 + 2*r.BareCommitP50
		fmt.Fprintf(&b, "| %d | %d | %.0f | %s | %.0f | %.2f× | %.0f | %s | %s | %s | %s | %s %s |\n",
			r.RowBytes, r.BatchRows, r.BareRowsPerSec, ms(r.BareCommitP50), r.SinkRowsPerSec, r.ratio(),
			r.AppendRowsPerSec, ms(r.AppendP50), ms(r.SinkApplyP50), ms(r.E2EP50), ms(r.E2EP99), ms(goal), met(r.E2EP50 <= goal))
	}
	for _, r := range t {
		if r.BareCommitBesideP50 > 0 {
			goal := r.AppendP50 + 2*r.BareCommitBesideP50
			fmt.Fprintf(&b, "\nE2E goal against the bare commit beside the sink (%d B rows, %d rows/txn): e2e p50 %s, append p50 + 2× %s = %s %s",
				r.RowBytes, r.BatchRows, ms(r.E2EP50), ms(r.BareCommitBesideP50), ms(goal), met(r.E2EP50 <= goal))
		}
	}
	b.WriteString("\n")
	for _, r := range t {
		if r.RowBytes == 1024 {
			fmt.Fprintf(&b, "\nGoal sink ≥ 0.8× bare rows/s (1 KB rows, %d rows/txn): %.2f× %s", r.BatchRows, r.ratio(), met(r.ratio() >= 0.8))
		}
	}
	b.WriteString("\n\nWhere the end-to-end time goes (p50 / mean of each hop, one clock; see sqlbench.Stages):\n\n")
	b.WriteString("| row bytes | rows/txn | ack → dispatch | dispatch → target recv | recv → apply start | apply (SQL txn) | commit → seen | poll p50 | e2e mean | samples | txns per apply | bare commit p50 beside the sink |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range t {
		st := r.Stages
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %d | %.1f | %s |\n", r.RowBytes, r.BatchRows,
			st.AckToDispatch, st.DispatchToRecv, st.RecvToApply, st.Apply, st.CommitToSeen, ms(st.PollP50),
			ms(st.E2EMean), st.Samples, st.TxnsPerApply, ms(r.BareCommitBesideP50))
	}
	return b.String()
}

func (r Row) ratio() float64 {
	if r.BareRowsPerSec == 0 {
		return 0
	}
	return r.SinkRowsPerSec / r.BareRowsPerSec
}

func met(ok bool) string {
	if ok {
		return "(met)"
	}
	return "(missed)"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// Run measures every configuration of cfg and returns the table.
func Run(ctx context.Context, cfg Config) (Table, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sqlbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cl, err := lsbench.StartCluster(filepath.Join(dir, "logstore"), cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	lc, err := client.New(client.Config{Addrs: cl.APIAddrs(), Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	var t Table
	n := 0
	for _, size := range cfg.RowBytes {
		for _, batch := range cfg.BatchRows {
			n++
			r := Row{RowBytes: size, BatchRows: batch}
			if err := bare(ctx, cfg, &r, fmt.Sprintf("sqlbench_bare_%d", n)); err != nil {
				return t, fmt.Errorf("bare loader: %w", err)
			}
			if err := sink(ctx, cfg, cl.APIAddrs(), lc, &r, fmt.Sprintf("sqlbench-%d", n)); err != nil {
				return t, fmt.Errorf("sink: %w", err)
			}
			t = append(t, r)
		}
	}
	return t, nil
}

// createTable creates an append table the shape of the Mapping's.
func createTable(ctx context.Context, conn *pgx.Conn, table string) error {
	_, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+table+"; CREATE TABLE "+table+
		" (lsn bigint NOT NULL, topic_offset bigint PRIMARY KEY, key bytea, value bytea NOT NULL, value_json jsonb, headers jsonb, applied_at timestamptz)")
	return err
}

var appendCols = []string{"lsn", "topic_offset", "key", "value", "value_json", "headers", "applied_at"}

// bare measures the bare loader into table.
func bare(ctx context.Context, cfg Config, r *Row, table string) error {
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := createTable(ctx, conn, table); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) }()
	value := randomBytes(r.RowBytes)
	var lat []time.Duration
	off, rows := int64(0), 0
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	for lsn := int64(1); ; lsn++ {
		now := time.Now()
		if now.After(end) {
			break
		}
		t0 := time.Now()
		if err := copyTxn(ctx, conn, table, lsn, &off, r.BatchRows, value); err != nil {
			return err
		}
		if t0.After(measureFrom) {
			lat = append(lat, time.Since(t0))
			rows += r.BatchRows
		}
	}
	r.BareRowsPerSec = float64(rows) / cfg.Duration.Seconds()
	r.BareCommitP50 = quantile.Of(lat, 0.5)
	return nil
}

// copyTxn is the bare loader's transaction: BEGIN, COPY of n rows from
// offset *off, COMMIT.
func copyTxn(ctx context.Context, conn *pgx.Conn, table string, lsn int64, off *int64, n int, value []byte) error {
	now := time.Now()
	batch := make([][]any, n)
	for i := range batch {
		batch[i] = []any{lsn, *off, nil, value, nil, nil, now}
		*off++
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{table}, appendCols, pgx.CopyFromRows(batch)); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// probe runs a bare transaction of n rows every 20ms on its own connection
// and table until ctx ends: the bare commit under the same load as the
// sink's (the LogStore's fsyncs, the process's CPU), returned as a p50.
func probe(ctx context.Context, dsn, table string, n int, value []byte) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	if err := createTable(ctx, conn, table); err != nil {
		return 0, err
	}
	defer func() { _, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) }()
	var lat []time.Duration
	off := int64(0)
	for lsn := int64(1); ctx.Err() == nil; lsn++ {
		t0 := time.Now()
		if err := copyTxn(ctx, conn, table, lsn, &off, n, value); err != nil {
			if ctx.Err() != nil {
				break
			}
			return 0, err
		}
		lat = append(lat, time.Since(t0))
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return quantile.Of(lat, 0.5), nil
}

// sink measures the LogPlayer feeding a sqlstore target on topic.
func sink(ctx context.Context, cfg Config, addrs []string, lc *client.Client, r *Row, topic string) error {
	id := types.TargetID(topic)
	m, err := sqlstore.NewMapping(sqlstore.MappingConfig{TargetID: id, Topics: []string{topic}})
	if err != nil {
		return err
	}
	table := m.Table(topic)
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	cleanup := func() {
		_, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		_, _ = conn.Exec(context.Background(), "DELETE FROM "+sqlstore.StateTable+" WHERE target_id = $1", string(id))
	}
	cleanup()
	defer cleanup()
	store, err := sqlstore.Open(ctx, sqlstore.Config{TargetID: id, Dialect: sqlstore.Postgres, DSN: cfg.DSN, Apply: m.Apply, Setup: m.Setup})
	if err != nil {
		return err
	}
	defer store.Close()
	tl := newTimeline()
	timed := &timedStore{Store: store, tl: tl}
	srv, err := target.NewServer(target.Config{TargetID: id, Store: timed, Topics: []string{topic}, Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
	if err != nil {
		return err
	}
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer(append(target.ServerOptions(), grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive),
		grpc.ChainStreamInterceptor(tl.interceptor))...)
	srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	p, err := logplayer.New(logplayer.Config{PlayerID: "sqlbench", LogStore: addrs, Logger: cfg.Logger, Registerer: prometheus.NewRegistry(),
		Targets: []logplayer.TargetConfig{{ID: string(id), Address: lis.Addr().String(), Topics: []string{topic}}}})
	if err != nil {
		return err
	}
	pctx, stopPlayer := context.WithCancel(ctx)
	playerDone := make(chan error, 1)
	go func() { playerDone <- p.Run(pctx) }()
	defer func() { stopPlayer(); <-playerDone; p.Close() }()

	// The poller: when each max(lsn) became visible on its own connection.
	poll, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer poll.Close(context.Background())
	var seen visibility
	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var wg sync.WaitGroup
	wg.Go(func() { seen.run(wctx, poll, table) })

	// The LogPlayer and the target are connected once a first transaction
	// is visible: the window does not measure their start.
	if _, err := lc.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: topic, Messages: []*logstorepb.Message{{Value: []byte("start")}}}}}); err != nil {
		return err
	}
	if err := seen.waitFor(ctx, 1, time.Minute); err != nil {
		return err
	}
	value := randomBytes(r.RowBytes)
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	var mu sync.Mutex
	var acks []ack
	var appended atomic.Int64
	for i := range cfg.Producers {
		wg.Go(func() {
			msgs := make([]*logstorepb.Message, r.BatchRows)
			for i := range msgs {
				msgs[i] = &logstorepb.Message{Value: value}
			}
			req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: topic, Messages: msgs}}}
			var every time.Duration
			if cfg.Rate > 0 {
				every = time.Duration(float64(cfg.Producers) / cfg.Rate * float64(time.Second))
			}
			next := time.Now().Add(every * time.Duration(i) / time.Duration(cfg.Producers)) // staggered, not in bursts
			for wctx.Err() == nil && time.Now().Before(end) {
				if every > 0 {
					select {
					case <-wctx.Done():
						return
					case <-time.After(time.Until(next)):
					}
					next = next.Add(every)
				}
				t0 := time.Now()
				resp, err := lc.Append(wctx, req)
				if err != nil {
					continue // a transient refusal: the next one retries
				}
				t1 := time.Now()
				if t0.After(measureFrom) {
					appended.Add(int64(r.BatchRows))
					mu.Lock()
					acks = append(acks, ack{lsn: resp.Lsn, sent: t0, acked: t1})
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(time.Until(measureFrom))
	before, err := visibleRows(ctx, conn, table)
	if err != nil {
		return err
	}
	probeCtx, stopProbe := context.WithDeadline(wctx, end)
	defer stopProbe()
	var probeErr error
	wg.Go(func() {
		r.BareCommitBesideP50, probeErr = probe(probeCtx, cfg.DSN, strings.ReplaceAll(table, "sqlbench", "sqlbench_probe"), r.BatchRows, value)
	})
	time.Sleep(time.Until(end))
	after, err := visibleRows(ctx, conn, table)
	if err != nil {
		return err
	}
	// Let the last acknowledged transactions become visible for their
	// latency, then stop.
	var last uint64
	mu.Lock()
	for _, a := range acks {
		last = max(last, a.lsn)
	}
	mu.Unlock()
	if err := seen.waitFor(ctx, last, 30*time.Second); err != nil {
		return err
	}
	stopWork()
	wg.Wait()
	if probeErr != nil {
		return fmt.Errorf("bare probe beside the sink: %w", probeErr)
	}

	r.SinkRowsPerSec = float64(after-before) / cfg.Duration.Seconds()
	r.AppendRowsPerSec = float64(appended.Load()) / cfg.Duration.Seconds()
	var appendLat, e2e []time.Duration
	for _, a := range acks {
		appendLat = append(appendLat, a.acked.Sub(a.sent))
		if v, ok := seen.at(a.lsn); ok {
			e2e = append(e2e, max(0, v.Sub(a.acked)))
		}
	}
	r.AppendP50 = quantile.Of(appendLat, 0.5)
	r.SinkApplyP50 = quantile.Of(timed.durations(), 0.5)
	r.E2EP50, r.E2EP99, r.E2ESamples = quantile.Of(e2e, 0.5), quantile.Of(e2e, 0.99), len(e2e)
	r.Stages = tl.stages(acks, &seen)
	r.Stages.TxnsPerApply = timed.txnsPerApply()
	return nil
}

// timeline records, per LSN, when each hop saw it (Unix nanoseconds).
type timeline struct {
	mu                                 sync.Mutex
	dispatched, recv, applied, applyAt map[uint64]int64
}

func newTimeline() *timeline {
	return &timeline{dispatched: map[uint64]int64{}, recv: map[uint64]int64{}, applied: map[uint64]int64{}, applyAt: map[uint64]int64{}}
}

// interceptor notes every Batch the target's Deliver stream receives.
func (tl *timeline) interceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &recvStream{ServerStream: ss, tl: tl})
}

type recvStream struct {
	grpc.ServerStream
	tl *timeline
}

func (s *recvStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if req, ok := m.(*targetpb.DeliverRequest); ok && err == nil {
		if b := req.GetBatch(); b != nil && len(b.Deliveries) > 0 {
			now := time.Now().UnixNano()
			s.tl.mu.Lock()
			s.tl.dispatched[b.Deliveries[0].Lsn] = b.DispatchedUnixNano
			for _, d := range b.Deliveries {
				s.tl.recv[d.Lsn] = now
			}
			s.tl.mu.Unlock()
		}
	}
	return err
}

func (tl *timeline) apply(ds []*targetpb.Delivery, start, end time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, d := range ds {
		tl.applyAt[d.Lsn], tl.applied[d.Lsn] = start.UnixNano(), end.UnixNano()
	}
}

// stages is the p50 of each hop over the acknowledged transactions.
func (tl *timeline) stages(acks []ack, seen *visibility) Stages {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var a2d, d2r, r2a, app, c2s, e2e []time.Duration
	for _, a := range acks {
		recv, ok1 := tl.recv[a.lsn]
		at, ok2 := tl.applyAt[a.lsn]
		done, ok3 := tl.applied[a.lsn]
		v, ok4 := seen.at(a.lsn)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			continue
		}
		d, ok := tl.dispatched[a.lsn]
		if !ok || d == 0 {
			continue
		}
		a2d = append(a2d, time.Duration(d-a.acked.UnixNano()))
		d2r = append(d2r, time.Duration(recv-d))
		e2e = append(e2e, v.Sub(a.acked))
		r2a = append(r2a, time.Duration(at-recv))
		app = append(app, time.Duration(done-at))
		c2s = append(c2s, time.Duration(v.UnixNano()-done))
	}
	return Stages{AckToDispatch: hopOf(a2d), DispatchToRecv: hopOf(d2r), RecvToApply: hopOf(r2a), Apply: hopOf(app),
		CommitToSeen: hopOf(c2s), E2EMean: hopOf(e2e).Mean, PollP50: seen.pollP50(), Samples: len(e2e)}
}

// timedStore records the duration of every Apply with deliveries.
type timedStore struct {
	*sqlstore.Store
	tl *timeline
	mu sync.Mutex
	d  []time.Duration
	n  int // transactions (deliveries with slices) over every recorded Apply
}

func (s *timedStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	t0 := time.Now()
	err := s.Store.Apply(ds, next)
	if len(ds) > 0 && err == nil {
		s.tl.apply(ds, t0, time.Now())
		s.mu.Lock()
		s.d = append(s.d, time.Since(t0))
		for _, d := range ds {
			if len(d.Slices) > 0 { // not a progress marker
				s.n++
			}
		}
		s.mu.Unlock()
	}
	return err
}

func (s *timedStore) txnsPerApply() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.d) == 0 {
		return 0
	}
	return float64(s.n) / float64(len(s.d))
}

func (s *timedStore) durations() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

type ack struct {
	lsn         uint64
	sent, acked time.Time
}

// visibleRows is the number of rows committed in table (offsets are dense
// from 0).
func visibleRows(ctx context.Context, conn *pgx.Conn, table string) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, "SELECT coalesce(max(topic_offset) + 1, 0) FROM "+table).Scan(&n)
	return n, err
}

// visibility records when each max(lsn) of a table was first seen.
type visibility struct {
	mu    sync.Mutex
	polls []seenLSN // increasing lsn
	query []time.Duration
}

type seenLSN struct {
	lsn uint64
	at  time.Time
}

func (v *visibility) run(ctx context.Context, conn *pgx.Conn, table string) {
	for ctx.Err() == nil {
		var lsn int64
		t0 := time.Now()
		// The newest offset's LSN, through the primary key's index (offsets
		// grow with LSNs in an append table): max(lsn) would scan the whole
		// table, slower with every row, and the poll is the observer's
		// resolution.
		err := conn.QueryRow(ctx, "SELECT lsn FROM "+table+" ORDER BY topic_offset DESC LIMIT 1").Scan(&lsn)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		if err != nil {
			if ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		now := time.Now()
		v.mu.Lock()
		v.query = append(v.query, now.Sub(t0))
		if n := len(v.polls); n == 0 || v.polls[n-1].lsn < uint64(lsn) {
			v.polls = append(v.polls, seenLSN{uint64(lsn), now})
		}
		v.mu.Unlock()
	}
}

// pollP50 is the p50 of one poll query: the poller's resolution.
func (v *visibility) pollP50() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return quantile.Of(slices.Clone(v.query), 0.5)
}

// at is when a max(lsn) >= lsn was first seen.
func (v *visibility) at(lsn uint64) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	i, _ := slices.BinarySearchFunc(v.polls, lsn, func(s seenLSN, l uint64) int {
		switch {
		case s.lsn < l:
			return -1
		case s.lsn > l:
			return 1
		}
		return 0
	})
	if i == len(v.polls) {
		return time.Time{}, false
	}
	return v.polls[i].at, true
}

// waitFor waits until lsn was seen, or d passed.
func (v *visibility) waitFor(ctx context.Context, lsn uint64, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, ok := v.at(lsn); ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("lsn %d not visible in the sink's table within %v", lsn, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
