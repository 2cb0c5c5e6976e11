package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/logstore"
)

// TestRunSmall runs a short table of every system and checks it is
// complete and sane.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	table, out := runRows(ctx, t, Config{Clients: []int{1, 8}, Duration: 500 * time.Millisecond, Warmup: 200 * time.Millisecond, Dir: t.TempDir()}, 2*len(Systems))
	for i, r := range table.Rows {
		wantClients, wantSystem := []int{1, 8}[i/len(Systems)], Systems[i%len(Systems)]
		if r.System != wantSystem || r.Clients != wantClients {
			t.Errorf("row %d is %s × %d, want %s × %d (levels interleaved)", i, r.System, r.Clients, wantSystem, wantClients)
		}
		if r.Txns == 0 || r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 || r.P999 < r.P99 || r.CPUPerTxn <= 0 {
			t.Errorf("bad row %+v", r)
		}
		// Every LogStore entry carries at least one txn; bare raft rows
		// have no aggregation.
		if r.System.logstore() != (r.TxnsPerEntry >= 1) || r.System.logstore() != (r.TxnsPerCall >= 1) {
			t.Errorf("row %+v: txns per entry %.2f, per call %.2f", r, r.TxnsPerEntry, r.TxnsPerCall)
		}
		// The leader's split of a LogStore call fits inside the call.
		if r.System.logstore() && (r.RaftCommit <= 0 || r.LeaderAppend < r.RaftCommit/2 || r.Avg <= 0) {
			t.Errorf("row %+v: leader append %v, raft commit %v, call %v", r, r.LeaderAppend, r.RaftCommit, r.Avg)
		}
		// At 8 clients the servers run long enough for the profile to
		// sample them (100 Hz).
		if r.Clients == 8 && r.ServerCPUPerTxn <= 0 {
			t.Errorf("row %+v: no server CPU measured", r)
		}
		// A client with a connection of its own has one txn at a time
		// to send: one per call.
		if r.System.logstore() && (r.System.conns() || r.System == LogStoreWALHTTP) && r.TxnsPerCall != 1 {
			t.Errorf("row %+v: %.2f txns per call, want 1", r, r.TxnsPerCall)
		}
	}
	// Without coalescing every transaction is a call of its own.
	plain, err := Run(ctx, Config{Clients: []int{4}, Duration: 500 * time.Millisecond, Warmup: 200 * time.Millisecond, Dir: t.TempDir(),
		Systems: []System{LogStoreWAL}, PlainAppends: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := plain.Rows[0]; r.Txns == 0 || r.TxnsPerCall != 1 {
		t.Errorf("plain appends: %+v, want exactly 1 txn per call", r)
	}
	for _, s := range []string{"\n| 1 | logstore-wal | ", "\n| 8 | raft-boltdb | ", "\n| 8 | grpc-conns | ", "| serial p50 | 1 | logstore-wal / raft-boltdb |", "p99.9", "The floor under one connection per client"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

// runRows runs cfg, logs its table and checks it has want rows.
func runRows(ctx context.Context, t *testing.T, cfg Config, want int) (Table, string) {
	t.Helper()
	table, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := table.String()
	t.Logf("\n%s", out)
	if len(table.Rows) != want {
		t.Fatalf("%d rows, want %d", len(table.Rows), want)
	}
	return table, out
}

// TestMeasureCountsCompletionsInWindow: an operation counts when it ends
// inside the window, with its whole latency; one that starts in the window
// and ends after it does not count (the old bench counted starts).
func TestMeasureCountsCompletionsInWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Duration: time.Second, Warmup: 300 * time.Millisecond, NoServerCPU: true}
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		// Ends at 400ms (inside [300ms, 1300ms)), then at 2400ms (after).
		durs := []time.Duration{400 * time.Millisecond, 2 * time.Second}
		calls := 0
		o := func(ctx context.Context) error {
			d := durs[min(calls, len(durs)-1)]
			calls++
			time.Sleep(d) // the fake clock of the bubble
			return nil
		}
		r := measure(context.Background(), LogStoreWAL, []op{o}, cfg)
		if r.Txns != 1 || r.P50 != 400*time.Millisecond || r.TxPerSec != 1 || calls != 2 {
			t.Errorf("row %+v after %d calls: want 1 txn of 400ms, 1 tx/s, 2 calls", r, calls)
		}
		// Errors are counted by when they complete too.
		bad := func(ctx context.Context) error { time.Sleep(100 * time.Millisecond); return errors.New("no") }
		r = measure(context.Background(), LogStoreWAL, []op{bad, bad}, cfg)
		if r.Txns != 0 || r.Errors != 20 {
			t.Errorf("row %+v: want 0 txns and 2×10 errors", r)
		}
	})
}

func TestParseSystems(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []System
	}{
		{"all", Systems},
		{"logstore-wal", []System{LogStoreWAL}},
		{"raft", []System{RaftWAL, RaftBoltDB}},
		{"logstore-wal,raft-boltdb,logstore-wal", []System{LogStoreWAL, RaftBoltDB}},
		{"logstore-wal, logstore", []System{LogStoreWAL, LogStoreWALConns, LogStoreWALHTTP, LogStoreBoltDB, LogStoreBoltDBConns}},
	} {
		got, err := ParseSystems(c.in)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("ParseSystems(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "raft-", "logstore-wal,bolt", "wal"} {
		if _, err := ParseSystems(in); !errors.Is(err, ErrUnknownSystem) {
			t.Errorf("ParseSystems(%q): %v, want ErrUnknownSystem", in, err)
		}
	}
	if _, err := Run(context.Background(), Config{Systems: []System{"nope"}}); !errors.Is(err, ErrUnknownSystem) {
		t.Errorf("Run with an unknown system: %v", err)
	}
	if LogStoreBoltDBConns.backend() != logstore.RaftLogBoltDB || LogStoreWALConns.backend() != logstore.RaftLogWAL || !RaftWAL.bare() || LogStoreWAL.conns() {
		t.Error("system name helpers disagree with the names")
	}
}

// fixedTable has every system at 1 and 64 clients, and two at 256.
func fixedTable() Table {
	ms := time.Millisecond
	return Table{Rows: []Row{
		{System: LogStoreWAL, Clients: 1, TxPerSec: 1000, P50: 1 * ms, P99: 2 * ms, P999: 3 * ms, CPUPerTxn: 250 * time.Microsecond, TxnsPerEntry: 1, TxnsPerCall: 1},
		{System: LogStoreWALConns, Clients: 1, TxPerSec: 990, P50: 1 * ms, P99: 2 * ms, P999: 3 * ms, TxnsPerEntry: 1, TxnsPerCall: 1},
		{System: RaftWAL, Clients: 1, TxPerSec: 1100, P50: 800 * time.Microsecond, P99: 2 * ms, P999: 3 * ms},
		{System: RaftBoltDB, Clients: 1, TxPerSec: 500, P50: 2 * ms, P99: 4 * ms, P999: 5 * ms},
		{System: LogStoreWAL, Clients: 64, TxPerSec: 20000, Avg: 3500 * time.Microsecond, P50: 3 * ms, P99: 6 * ms, P999: 9 * ms, TxnsPerEntry: 60.25, TxnsPerCall: 20,
			LeaderAppend: 2 * ms, RaftCommit: 1500 * time.Microsecond, ServerCPUPerTxn: 50 * time.Microsecond},
		{System: LogStoreWALConns, Clients: 64, TxPerSec: 15000, P50: 4 * ms, P99: 8 * ms, P999: 12 * ms, TxnsPerEntry: 50, TxnsPerCall: 1, ServerCPUPerTxn: 100 * time.Microsecond},
		{System: GRPCConns, Clients: 64, TxPerSec: 40000, P50: 1 * ms, P99: 2 * ms, P999: 3 * ms, CPUPerTxn: 40 * time.Microsecond, ServerCPUPerTxn: 30 * time.Microsecond},
		{System: RaftWAL, Clients: 64, TxPerSec: 10000, P50: 6 * ms, P99: 9 * ms, P999: 10 * ms, Errors: 2},
		{System: RaftBoltDB, Clients: 64, TxPerSec: 5000, P50: 12 * ms, P99: 20 * ms, P999: 30 * ms},
		{System: LogStoreWAL, Clients: 256, TxPerSec: 30000, P50: 8 * ms, P99: 16 * ms, P999: 20 * ms, TxnsPerEntry: 200, TxnsPerCall: 25},
		{System: RaftBoltDB, Clients: 256, TxPerSec: 10000, P50: 25 * ms, P99: 40 * ms, P999: 50 * ms},
	}}
}

// TestTableString checks the rows, the goal ratios and their marks on
// fixed rows.
func TestTableString(t *testing.T) {
	out := fixedTable().String()
	for _, s := range []string{
		"| 1 | logstore-wal | 1000 | 1.00 ms | 2.00 ms | 3.00 ms | 250 µs | 1.0 | 1.0 | 0 |",
		"| 64 | raft-wal | 10000 | 6.00 ms | 9.00 ms | 10.00 ms | 0 µs | – | – | 2 |",
		"| 64 | logstore-wal | 20000 | 3.00 ms | 6.00 ms | 9.00 ms | 0 µs | 20.0 | 60.2 | 0 |",
		"| serial p50 | 1 | logstore-wal / raft-boltdb | 0.50× | ≤ 0.7× | met |",
		"| serial p50 | 1 | logstore-wal / raft-wal | 1.25× | ≤ 1.3× | met |",
		"| tx/s | 64 | logstore-wal / raft-boltdb | 4.00× | ≥ 2.5× | met |",
		"| tx/s | 64 | logstore-wal / raft-wal | 2.00× | ≥ 1.5× | met |",
		"| tx/s | 64 | logstore-wal-conns / logstore-wal | 0.75× | ≥ 0.8× | missed |",
		"| tx/s | 256 | logstore-wal / raft-boltdb | 3.00× | ≥ 2.5× | met |",
		"| 64 | logstore-wal | 3.50 ms | 1.50 ms | 0.50 ms | 1.50 ms |",
		"| 64 | 40000 | 40 µs | 15000 | 16000 |",
		"| 64 | 50 µs | 100 µs | 30 µs | 90 µs | missed |",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks line\n%s\n in\n%s", s, out)
		}
	}
	// Goals without both rows are left out.
	if strings.Contains(out, "| tx/s | 256 | logstore-wal / raft-wal |") || strings.Contains(out, "| 256 | logstore-wal-conns / logstore-wal |") {
		t.Errorf("a goal without its rows is printed:\n%s", out)
	}
	if s := (Table{Rows: []Row{{System: RaftWAL, Clients: 1}}}).String(); strings.Contains(s, "Goals") {
		t.Errorf("a table without goal rows prints goals:\n%s", s)
	}
}

// BenchmarkAppend drives b.N Appends split over clients goroutines against a
// 3-node cluster (fsync on), reporting latency percentiles and transactions
// per Raft entry; BenchmarkBareRaft is the reference, same shape.
func BenchmarkAppend(b *testing.B) {
	for _, clients := range []int{1, 10, 64, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c, err := StartCluster(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			cfg := Config{}
			_ = cfg.validate()
			bd := &bed{cfg: cfg, req: appendRequest(cfg)}
			cl, err := bd.newClient(c.APIAddrs())
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			before := c.batchStats()
			row := measureN(b, clients, bd.appendOn(cl))
			ls := c.batchStats().since(before)
			row.report(b)
			b.ReportMetric(ls.perEntry, "txns/entry")
			b.ReportMetric(ls.perCall, "txns/call")
		})
	}
}

func BenchmarkBareRaft(b *testing.B) {
	for _, clients := range []int{1, 10, 64, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			br, err := startBareRaft(b.TempDir(), logstore.RaftLogWAL, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			defer br.close()
			payload := make([]byte, 2*256)
			measureN(b, clients, func(context.Context) error {
				return br.leader().Apply(payload, 10*time.Second).Error()
			}).report(b)
		})
	}
}

type lats []time.Duration

func (l lats) p(q float64) float64 {
	return float64(quantile.Of(l, q)) / float64(time.Millisecond)
}

func (l lats) report(b *testing.B) {
	b.ReportMetric(l.p(0.5), "p50-ms")
	b.ReportMetric(l.p(0.99), "p99-ms")
	b.ReportMetric(l.p(0.999), "p999-ms")
}

func measureN(b *testing.B, clients int, op op) lats {
	b.ReportAllocs()
	b.ResetTimer()
	var mu sync.Mutex
	var all lats
	var wg sync.WaitGroup
	per := (b.N + clients - 1) / clients
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine lats
			for range per {
				t0 := time.Now()
				if err := op(context.Background()); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	return all
}
