package dispatcher

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"hash/maphash"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

var (
	confMessages = flag.Int("conformance.messages", 0, "conformance: transactions in the log (0: the CI bounds)")
	confFailures = flag.Int("conformance.failures", 2, "conformance: target crashes plus LogPlayer restarts (with -conformance.messages)")
	confQueue    = flag.Int("conformance.queue", 2, "conformance: messages per inner queue (MaxCount)")
)

// bounds is one size of the conformance model.
type bounds struct{ messages, failures, queue int }

// ciBounds are explored by default: 311,682 and 256,661 states (since the
// window counts batches and targets may send bogus acks); the dispatcher
// package's tests take ~1 min of CPU with -race. Bigger bounds:
// -conformance.messages=4 -conformance.failures=2, or more.
var ciBounds = []bounds{{4, 1, 2}, {3, 2, 2}}

func confBounds() []bounds {
	if *confMessages > 0 {
		return []bounds{{*confMessages, *confFailures, *confQueue}}
	}
	return ciBounds
}

// conformanceModel is the paper's model with two targets: a subscribes to x,
// b to x and y. The log cycles through {y}, {x}, {x,y}, {y}, {z}, {x}, … so
// a gets gaps (filled by progress markers), b gets most, and LSN 5 is nobody's.
func conformanceModel(messages, failures, queue int) *model {
	cycle := [][]string{{"y"}, {"x"}, {"x", "y"}, {"y"}, {"z"}, {"x"}}
	var log []*logstorepb.Transaction
	for l := 1; l <= messages; l++ {
		log = append(log, txn(types.LSN(l), cycle[(l-1)%len(cycle)]...))
	}
	m := newModel(log, []string{"a", "b"}, [][]string{{"x"}, {"x", "y"}})
	m.maxFailures = failures
	m.queue.MaxCount = queue
	return m
}

// explorer is a depth-first search over the world's states, deduplicated by
// a 64-bit hash of their fingerprint. Liveness is checked in every settled
// state, where only failures can still change something.
type explorer struct {
	m           *model
	seed        maphash.Seed
	seen        map[uint64]float64 // state hash -> maximal paths from it (onStack while visiting)
	states      int
	transitions int
	terminals   int // no action changes the state
	settled     int // only failures change the state: liveness is checked
	// reduce enables the partial-order reduction (see visit).
	reduce bool
	// prunePanics makes a panic of the real code end its branch instead of
	// the search (mutation runs look for what the target sees).
	prunePanics   bool
	panics        int
	settledStates map[uint64]bool
	maxDepth      int
	path          []action
	found         *violation
	foundPath     []action
}

const onStack = -1

func newExplorer(m *model) *explorer {
	return &explorer{m: m, seed: maphash.MakeSeed(), seen: make(map[uint64]float64), reduce: true, settledStates: map[uint64]bool{}}
}

// visit explores from w (whose fingerprint is fp) and returns the number of
// maximal paths from it (action sequences; a float64: they are many).
func (e *explorer) visit(w *world, fp []byte) float64 {
	h := maphash.Bytes(e.seed, fp)
	if paths, ok := e.seen[h]; ok {
		if paths == onStack {
			e.fail(&violation{"liveness", "a cycle: the protocol can run forever without progress"}, nil)
		}
		return paths
	}
	e.seen[h] = onStack
	e.states++
	e.maxDepth = max(e.maxDepth, len(e.path))
	var paths float64
	progressed, settled := false, true
	var buf [16]action
	acts := w.actions(buf[:0], true)
	// Once no failure can happen and the main stream is done, nothing
	// couples the targets any more: each remaining action (fetch, send,
	// apply, ack, progress, return of target t) reads and writes only t's
	// part of the world (its queue, last ack and recovery range in the
	// dispatcher, its fetchers, wire, pending ack and durable state), and
	// currentLSN no longer changes. Actions of different targets then
	// commute and never enable or disable each other, so the actions of one
	// target form a persistent set: exploring only the first target that
	// can move still reaches every settled state and every violation (a
	// violation is local to one target's steps). This partial-order
	// reduction is checked against the full search in
	// TestConformanceReduction.
	decoupled := e.reduce && w.failures == w.m.maxFailures && w.d.CurrentLSN() == w.lastLSN()
	if decoupled {
		slices.SortStableFunc(acts, func(x, y action) int { return cmp.Compare(w.targetOf(x), w.targetOf(y)) })
	}
	group := -1
	cfp := make([]byte, 0, 2*len(fp))
	for _, a := range acts {
		if decoupled {
			if g := w.targetOf(a); g != group {
				if progressed {
					break // one target's moves are enough
				}
				group = g
			}
		}
		c := w.clone()
		if v := c.step(a); v != nil {
			if v.kind == "panic" && e.prunePanics {
				e.panics++
				continue
			}
			e.fail(v, &a)
			return 0
		}
		cfp = c.fingerprint(cfp[:0])
		if bytes.Equal(cfp, fp) {
			continue // a no-op here (full catchup queue, nothing to send, …)
		}
		progressed = true
		settled = settled && a.fault()
		e.transitions++
		e.path = append(e.path, a)
		n := e.visit(c, cfp)
		e.path = e.path[:len(e.path)-1]
		if e.found != nil {
			return 0
		}
		paths += n
	}
	if settled {
		// Only failures can happen here: a path whose failures stopped
		// ends here, so everything must be drained and delivered.
		e.settled++
		e.settledStates[h] = true
		if v := w.liveness(); v != nil {
			e.fail(v, nil)
			return 0
		}
	}
	if !progressed {
		e.terminals++
		paths = 1
	}
	e.seen[h] = paths
	return paths
}

func (e *explorer) fail(v *violation, last *action) {
	if e.found != nil {
		return
	}
	e.found = v
	e.foundPath = slices.Clone(e.path)
	if last != nil {
		e.foundPath = append(e.foundPath, *last)
	}
}

// report replays the violating path with tracing on.
func (e *explorer) report() string {
	w := newWorld(e.m)
	w.tracing = true
	for _, a := range e.foundPath {
		if v := w.step(a); v != nil {
			w.note("=> %s", v)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\ntrace (%d steps):\n", e.found, len(e.foundPath))
	for i, s := range w.trace {
		fmt.Fprintf(&b, "%3d  %s\n", i+1, s)
	}
	return b.String()
}

// run explores from the initial world and returns the number of maximal
// paths of the (reduced) graph.
func (e *explorer) run() float64 {
	// The search allocates many short-lived clones and keeps little: a
	// lazier collector halves its time.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	w := newWorld(e.m)
	return e.visit(w, w.fingerprint(nil))
}

// TestConformance explores every interleaving of the protocol's actions on
// the real Dispatcher and targetqueue for small bounds (docs/DESIGN.md, "Formal model"; issue
// 7.4): 2 targets with different topic sets, -conformance.messages
// transactions, -conformance.failures target crashes and LogPlayer restarts.
// Safety at every apply: each target applies exactly its messages, in LSN
// order, once (progress markers never skip one). Liveness at every terminal
// state: everything drained and every target has every message.
func TestConformance(t *testing.T) {
	for _, b := range confBounds() {
		t.Run(fmt.Sprintf("messages=%d,failures=%d,queue=%d", b.messages, b.failures, b.queue), func(t *testing.T) {
			start := time.Now()
			e := newExplorer(conformanceModel(b.messages, b.failures, b.queue))
			paths := e.run()
			if e.found != nil {
				t.Fatal(e.report())
			}
			if e.settled == 0 {
				t.Fatal("no settled state reached")
			}
			t.Logf("2 targets, %d messages, %d failures, queue %d: %d states, %d transitions, %d settled states (liveness checked), %.3g maximal paths in the reduced graph, depth %d, in %v",
				b.messages, b.failures, b.queue, e.states, e.transitions, e.settled, paths, e.maxDepth, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestConformanceMutations proves the conformance test has teeth: each
// mutation disables one safety mechanism of the real code, and the search
// must find a target applying a message twice, out of order, or never. The
// real code's own assertions (panics) would often stop these runs first; the
// search prunes those branches to show the target-side check catches the
// bug by itself.
func TestConformanceMutations(t *testing.T) {
	for _, tc := range testMutations {
		t.Run(tc.name, func(t *testing.T) {
			b := confBounds()[0]
			m := conformanceModel(b.messages, b.failures, b.queue)
			m.mutate = tc.mutate
			e := newExplorer(m)
			e.prunePanics = true
			e.run()
			if e.found == nil {
				t.Fatalf("mutation %s: no violation in %d states", tc.name, e.states)
			}
			t.Logf("mutation %s: found after %d states (%d branches ended in a panic of the real code):\n%s", tc.name, e.states, e.panics, e.report())
		})
	}
}

// TestConformanceReduction checks the partial-order reduction against the
// full search on smaller bounds: same verdict, same settled states.
func TestConformanceReduction(t *testing.T) {
	m := conformanceModel(2, 1, 2)
	full, reduced := newExplorer(m), newExplorer(m)
	full.reduce = false
	reduced.seed = full.seed
	full.run()
	reduced.run()
	if full.found != nil || reduced.found != nil {
		t.Fatalf("violation: full %v, reduced %v", full.found, reduced.found)
	}
	t.Logf("full search: %d states, reduced: %d states, settled: %d and %d", full.states, reduced.states, len(full.settledStates), len(reduced.settledStates))
	if !maps.Equal(full.settledStates, reduced.settledStates) || reduced.states >= full.states {
		t.Fatalf("reduction disagrees: settled %v vs %v, states %d vs %d", full.settledStates, reduced.settledStates, full.states, reduced.states)
	}
}
