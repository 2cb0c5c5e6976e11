package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Row is one measured system and concurrency.
type Row struct {
	System   System        `json:"system"`
	Clients  int           `json:"clients"`
	Txns     int           `json:"txns"` // completed inside the window
	Errors   int           `json:"errors"`
	TxPerSec float64       `json:"tx_per_sec"`
	Avg      time.Duration `json:"avg_ns"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	P999     time.Duration `json:"p999_ns"`
	// TxnsPerEntry is the mean number of transactions per Raft entry the
	// aggregator wrote during the row (LogStore rows; 0 for bare raft, one
	// Apply per entry).
	TxnsPerEntry float64 `json:"txns_per_entry,omitempty"`
	// TxnsPerCall is the mean number of transactions per gRPC call
	// (Append or AppendBatch) the leader served during the row.
	TxnsPerCall float64 `json:"txns_per_call,omitempty"`
	// CPUPerTxn is the process's CPU time per successful operation over
	// the row's load (see the package comment; 0 where not measured).
	// With ServerProcess: this process's and the server process's CPU
	// time over the row's window per transaction completed in it.
	CPUPerTxn time.Duration `json:"cpu_per_txn_ns,omitempty"`
	// ServerCPUPerTxn is the part of it the servers used: with
	// ServerProcess, the server process's CPU time over the row's window
	// per transaction completed in it (child.go); else the samples of the
	// goroutines labelled as server's in a CPU profile of the row
	// (servercpu.go; an estimate at 100 Hz). 0 where not measured.
	ServerCPUPerTxn time.Duration `json:"server_cpu_per_txn_ns,omitempty"`
	// ServerProcess reports that the row's servers ran in a process of
	// their own (Config.ServerCommand).
	ServerProcess bool `json:"server_process,omitempty"`
	// LeaderAppend is the leader's mean time from intake to apply result
	// per request, RaftCommit its mean time from raft.Apply to the result
	// per entry (LogStore rows, over the row's whole load).
	LeaderAppend time.Duration `json:"leader_append_ns,omitempty"`
	RaftCommit   time.Duration `json:"raft_commit_ns,omitempty"`
}

// Table is Run's result (and what `bench store --json` writes).
type Table struct {
	Duration   time.Duration `json:"duration_ns"` // of each row's window
	Topics     int           `json:"topics"`
	SliceBytes int           `json:"slice_bytes"`
	Rows       []Row         `json:"rows"`
}

// Goal is one of issue 11's goals: a ratio of two systems' figure at a
// client count, at most or at least Target.
type Goal struct {
	What    string // "serial p50", "tx/s"
	Clients int
	Num     System
	Den     System
	AtMost  bool    // Ratio must be <= Target (else >=)
	Target  float64 // ratio
	p50     bool    // compares p50 (else tx/s)
}

// Goals are issue 11's, stated as ratios within one run.
var Goals = []Goal{
	{What: "serial p50", Clients: 1, Num: LogStoreWAL, Den: RaftBoltDB, AtMost: true, Target: 0.7, p50: true},
	{What: "serial p50", Clients: 1, Num: LogStoreWAL, Den: RaftWAL, AtMost: true, Target: 1.3, p50: true},
	{What: "tx/s", Clients: 64, Num: LogStoreWAL, Den: RaftBoltDB, Target: 2.5},
	{What: "tx/s", Clients: 256, Num: LogStoreWAL, Den: RaftBoltDB, Target: 2.5},
	{What: "tx/s", Clients: 64, Num: LogStoreWAL, Den: RaftWAL, Target: 1.5},
	{What: "tx/s", Clients: 256, Num: LogStoreWAL, Den: RaftWAL, Target: 1.5},
	{What: "tx/s", Clients: 64, Num: LogStoreWALConns, Den: LogStoreWAL, Target: 0.8},
	{What: "tx/s", Clients: 256, Num: LogStoreWALConns, Den: LogStoreWAL, Target: 0.8},
}

// Ratio returns g's ratio in t, false when t lacks one of its rows.
func (t Table) Ratio(g Goal) (float64, bool) {
	num, ok1 := t.Row(g.Num, g.Clients)
	den, ok2 := t.Row(g.Den, g.Clients)
	if !ok1 || !ok2 {
		return 0, false
	}
	if g.p50 {
		if den.P50 <= 0 {
			return 0, false
		}
		return float64(num.P50) / float64(den.P50), true
	}
	if den.TxPerSec <= 0 {
		return 0, false
	}
	return num.TxPerSec / den.TxPerSec, true
}

// Met reports whether ratio meets g.
func (g Goal) Met(ratio float64) bool {
	if g.AtMost {
		return ratio <= g.Target
	}
	return ratio >= g.Target
}

// String formats the table as Markdown: a line per level and system, then
// the goals this table has both rows of, each marked met or missed.
func (t Table) String() string {
	var b strings.Builder
	b.WriteString("| clients | system | tx/s | p50 | p99 | p99.9 | CPU per txn | txns per call | txns per entry | errors |\n")
	b.WriteString("| ---: | :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range t.Rows {
		perCall, perEntry := "–", "–"
		if r.System.logstore() {
			perCall, perEntry = fmt.Sprintf("%.1f", r.TxnsPerCall), fmt.Sprintf("%.1f", r.TxnsPerEntry)
		}
		fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %s | %s | %.0f µs | %s | %s | %d |\n", r.Clients, r.System, r.TxPerSec,
			fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.P999), float64(r.CPUPerTxn)/float64(time.Microsecond), perCall, perEntry, r.Errors)
	}
	var split strings.Builder
	for _, r := range t.Rows {
		if !r.System.logstore() || r.LeaderAppend <= 0 {
			continue
		}
		fmt.Fprintf(&split, "| %d | %s | %s | %s | %s | %s |\n", r.Clients, r.System, fmtDur(r.Avg),
			fmtDur(max(r.Avg-r.LeaderAppend, 0)), fmtDur(max(r.LeaderAppend-r.RaftCommit, 0)), fmtDur(r.RaftCommit))
	}
	if split.Len() > 0 {
		b.WriteString("\nWhere a LogStore Append's time goes (means): the client's whole call; gRPC and client = that minus the leader's intake → result; aggregator = intake → raft.Apply (the batch forming, hold included); Raft commit = raft.Apply → result of the entry.\n\n")
		b.WriteString("| clients | system | call | gRPC and client | aggregator | Raft commit |\n| ---: | :--- | ---: | ---: | ---: | ---: |\n")
		b.WriteString(split.String())
	}
	var goals strings.Builder
	for _, g := range Goals {
		ratio, ok := t.Ratio(g)
		if !ok {
			continue
		}
		op, verdict := "≥", "missed"
		if g.AtMost {
			op = "≤"
		}
		if g.Met(ratio) {
			verdict = "met"
		}
		fmt.Fprintf(&goals, "| %s | %d | %s / %s | %.2f× | %s %.1f× | %s |\n", g.What, g.Clients, g.Num, g.Den, ratio, op, g.Target, verdict)
	}
	if goals.Len() > 0 {
		b.WriteString("\nGoals of issue 11, as ratios within this run:\n\n")
		b.WriteString("| figure | clients | systems | ratio | goal | |\n| :--- | ---: | :--- | ---: | ---: | :--- |\n")
		b.WriteString(goals.String())
	}
	var overHTTP strings.Builder
	for _, n := range t.Levels() {
		g, ok1 := t.Row(LogStoreWALConns, n)
		h, ok2 := t.Row(LogStoreWALHTTP, n)
		if !ok1 || !ok2 || g.P50 <= 0 || g.TxPerSec <= 0 {
			continue
		}
		fmt.Fprintf(&overHTTP, "| %d | %s | %s | %.2f× | %.0f | %.0f | %.2f× |\n", n, fmtDur(g.P50), fmtDur(h.P50),
			float64(h.P50)/float64(g.P50), g.TxPerSec, h.TxPerSec, h.TxPerSec/g.TxPerSec)
	}
	if overHTTP.Len() > 0 {
		b.WriteString("\nJSON over HTTP beside gRPC, same nodes, one connection per client: logstore-wal-conns (an Append per gRPC call) and logstore-wal-http (POST /v1/append with a JSON body, transcoded by vanguard into the same gRPC handler).\n\n")
		b.WriteString("| clients | gRPC p50 | HTTP p50 | HTTP / gRPC | gRPC tx/s | HTTP tx/s | HTTP / gRPC |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		b.WriteString(overHTTP.String())
	}
	var floor, serverCPU strings.Builder
	for _, n := range t.Levels() {
		f, ok1 := t.Row(GRPCConns, n)
		shared, ok2 := t.Row(LogStoreWAL, n)
		conns, ok3 := t.Row(LogStoreWALConns, n)
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		fmt.Fprintf(&floor, "| %d | %.0f | %s | %.0f | %.0f |\n", n, f.TxPerSec, µs(f.CPUPerTxn), conns.TxPerSec, 0.8*shared.TxPerSec)
		verdict := "missed"
		bound := time.Duration(serverCPUFactor*float64(shared.ServerCPUPerTxn)) + f.ServerCPUPerTxn
		if conns.ServerCPUPerTxn <= bound {
			verdict = "met"
		}
		if shared.ServerCPUPerTxn > 0 && conns.ServerCPUPerTxn > 0 && f.ServerCPUPerTxn > 0 {
			method := "in-process, profile labels"
			if shared.ServerProcess && conns.ServerProcess && f.ServerProcess {
				method = "server processes"
			} else if shared.ServerProcess || conns.ServerProcess || f.ServerProcess {
				method = "mixed: not comparable"
				verdict = "–"
			}
			fmt.Fprintf(&serverCPU, "| %d | %s | %s | %s | %s | %s | %s |\n", n, µs(shared.ServerCPUPerTxn), µs(conns.ServerCPUPerTxn),
				µs(f.ServerCPUPerTxn), µs(bound), verdict, method)
		}
	}
	if floor.Len() > 0 {
		b.WriteString("\nThe floor under one connection per client: grpc-conns is a no-op unary gRPC call carrying the transaction's bytes (no LogStore), one connection per client, in the same run. When it is below 0.8 × logstore-wal, no design that sends one call per transaction can meet that goal on this machine.\n\n")
		b.WriteString("| clients | grpc-conns calls/s | its CPU per call | logstore-wal-conns tx/s | 0.8 × logstore-wal tx/s |\n| ---: | ---: | ---: | ---: | ---: |\n")
		b.WriteString(floor.String())
	}
	if serverCPU.Len() > 0 {
		b.WriteString("\nServer CPU per transaction: shared clients, one connection per client, and the no-op gRPC call's server side (the floor). With server processes, each row's servers ran in a process of their own and the figure is that process's CPU time (utime + stime) over the row's window divided by the transactions completed in it; in-process, it is the samples of the servers' goroutines in a CPU profile of the row (clients' garbage collected on the servers' time, the Go runtime's own work excluded). Goal of issue #26: one connection per client at most 1.2 × the shared clients' plus the floor.\n\n")
		b.WriteString("| clients | logstore-wal | logstore-wal-conns | grpc-conns (no-op) | 1.2 × shared + no-op | | method |\n| ---: | ---: | ---: | ---: | ---: | :--- | :--- |\n")
		b.WriteString(serverCPU.String())
	}
	return b.String()
}

// Levels returns the client counts of the rows, ascending.
func (t Table) Levels() []int {
	var out []int
	for _, r := range t.Rows {
		if !slices.Contains(out, r.Clients) {
			out = append(out, r.Clients)
		}
	}
	slices.Sort(out)
	return out
}

// RowSystems returns the systems of the rows, in Systems' order.
func (t Table) RowSystems() []System {
	var out []System
	for _, s := range Systems {
		for _, r := range t.Rows {
			if r.System == s {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// Row returns system's row for clients.
func (t Table) Row(system System, clients int) (Row, bool) {
	for _, r := range t.Rows {
		if r.System == system && r.Clients == clients {
			return r, true
		}
	}
	return Row{}, false
}

// serverCPUFactor is issue #26's bound on one-connection server CPU per
// transaction: this many times the shared clients', plus the no-op floor.
const serverCPUFactor = 1.2

func µs(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
