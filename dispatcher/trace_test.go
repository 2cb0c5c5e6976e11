//go:build tlatrace

package dispatcher

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// traceFile is the committed trace that tla/Trace.tla checks with TLC
// (tla/README.md, "Trace validation"). TLATRACE_UPDATE=1 rewrites it.
var traceFile = filepath.Join("..", "tla", "traces", "faulty.ndjson")

// traceActs are the actions tla/Trace.tla knows.
var traceActs = map[string]bool{
	"Targets": true, "Dispatch": true, "Return": true, "PushCatchup": true,
	"FetchingCompleted": true, "Suspend": true, "NextBatch": true, "Ack": true, "Progress": true,
}

// recordTrace runs one random world (the spec model's topics: A reads x, B
// reads y; transactions write x and y, x, y, ...) with seed, faults
// included, until it is drained, and returns the dispatcher's trace and the
// world's counters.
func recordTrace(t *testing.T, seed uint64) ([]byte, *world) {
	t.Helper()
	topics := [][]string{{"x"}, {"x", "y"}, {"y"}}
	var log []*logstorepb.Transaction
	for l := 1; l <= 6; l++ {
		log = append(log, txn(types.LSN(l), topics[(l-1)%3]...))
	}
	m := newModel(log, []string{"A", "B"}, [][]string{{"x"}, {"y"}})
	m.maxFailures = 3
	var buf bytes.Buffer
	SetTraceWriter(&buf)
	defer SetTraceWriter(nil)
	rng := rand.New(rand.NewPCG(seed, 7))
	w := newWorld(m)
	w.keepHistory = true
	var acts []action
	for step := 0; ; step++ {
		faults := w.failures < m.maxFailures
		acts = w.actions(acts[:0], faults)
		if len(acts) == 0 {
			break
		}
		if v := w.step(acts[rng.IntN(len(acts))]); v != nil {
			t.Fatalf("seed %d: %v", seed, v)
		}
		if !faults && w.liveness() == nil {
			break
		}
		if step > 10_000 {
			t.Fatalf("seed %d: not drained: %v", seed, w.liveness())
		}
	}
	if err := w.compareWithOracle(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return buf.Bytes(), w
}

// checkTrace checks a trace's form (what Go can check without TLC): every
// line a known action, Dispatch LSNs dense from the dispatcher's start,
// terms per target never decreasing within one dispatcher.
func checkTrace(t *testing.T, tr []byte) map[string]int {
	t.Helper()
	count := map[string]int{}
	var current types.LSN
	terms := map[string]types.Term{}
	sc := bufio.NewScanner(bytes.NewReader(tr))
	for n := 1; sc.Scan(); n++ {
		var e traceEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if !traceActs[e.Act] {
			t.Fatalf("line %d: unknown action %q", n, e.Act)
		}
		count[e.Act]++
		switch e.Act {
		case "Targets":
			if len(e.Targets) == 1 { // a new dispatcher
				current, terms = e.Current, map[string]types.Term{}
			}
		case "Dispatch":
			if e.LSN != current+1 {
				t.Fatalf("line %d: Dispatch %d after %d", n, e.LSN, current)
			}
			current = e.LSN
		default:
			if e.QTerm < terms[e.Target] {
				t.Fatalf("line %d: %s's term went from %d to %d", n, e.Target, terms[e.Target], e.QTerm)
			}
			terms[e.Target] = e.QTerm
		}
		if e.Current != current {
			t.Fatalf("line %d: current LSN %d, want %d", n, e.Current, current)
		}
	}
	return count
}

// TestTrace records a trace from a run with target crashes, a bogus ack
// and a LogPlayer restart, checks its form, and checks that the committed
// trace is well-formed too (TLC checks it against the spec: tla/README.md).
func TestTrace(t *testing.T) {
	const seed = 1
	tr, w := recordTrace(t, seed)
	count := checkTrace(t, tr)
	t.Logf("seed %d: %d lines %v; world %+v", seed, bytes.Count(tr, []byte("\n")), count, w.counts)
	if w.counts.crashes == 0 || count["Return"] < 3 || count["Suspend"] == 0 {
		t.Fatalf("seed %d: not a faulty run: %+v", seed, w.counts)
	}
	if os.Getenv("TLATRACE_UPDATE") == "1" {
		if err := os.WriteFile(traceFile, tr, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, committed)
}
