package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// seqLog hands out LSNs and offsets as a correct LogStore would, for
// writing histories by hand.
type seqLog struct {
	head uint64
	next map[string]uint64
	txns []histTxn // txns[lsn-1]
}

func newSeqLog() *seqLog { return &seqLog{next: map[string]uint64{}} }

// commit appends id writing one message to each topic and returns the
// transaction with its LSN and offsets.
func (l *seqLog) commit(id string, topics ...string) histTxn {
	l.head++
	t := histTxn{LSN: l.head, ID: id}
	for _, topic := range topics {
		t.Slices = append(t.Slices, histSlice{Topic: topic, FirstOffset: l.next[topic], Messages: 1})
		l.next[topic]++
	}
	l.txns = append(l.txns, t)
	return t
}

// ackedOp is the Append op that t's commit acknowledged, over [call, ret].
func ackedOp(client int, call, ret int64, t histTxn) histOp {
	return histOp{Client: client, Kind: opAppend, Call: call, Return: ret, ID: t.ID, Slices: t.Slices, Outcome: outcomeOK, LSN: t.LSN}
}

// unknownOp is an Append of id to topics (one message each) whose outcome is
// unknown.
func unknownOp(client int, call int64, id string, topics ...string) histOp {
	op := histOp{Client: client, Kind: opAppend, Call: call, ID: id, Outcome: outcomeUnknown}
	for _, t := range topics {
		op.Slices = append(op.Slices, histSlice{Topic: t, Messages: 1})
	}
	return op
}

// readOp is a Read of [from, from+len(txns)-1] that returned txns.
func readOp(client int, call, ret int64, from uint64, toHead bool, txns ...histTxn) histOp {
	return histOp{Client: client, Kind: opRead, Call: call, Return: ret, From: from, To: from + uint64(len(txns)) - 1, ToHead: toHead, Txns: txns}
}

func TestLinearizable(t *testing.T) {
	l := newSeqLog()
	a := l.commit("a", "x")
	b := l.commit("b", "x", "y") // concurrent with a's append and a read
	u := l.commit("u", "y")      // an unknown outcome that took effect
	c := l.commit("c", "x")
	for name, ops := range map[string][]histOp{
		"sequential": {
			ackedOp(0, 0, 10, a), ackedOp(0, 20, 30, b), readOp(1, 40, 50, 1, true, a, b),
		},
		"concurrent": {
			ackedOp(0, 0, 100, a), ackedOp(1, 10, 20, b), readOp(2, 15, 25, 1, false, a, b), readOp(3, 5, 8, 1, true),
		},
		"unknown outcomes, one took effect and one did not": {
			ackedOp(0, 0, 10, a), ackedOp(1, 5, 15, b),
			unknownOp(2, 12, "u", "y"), unknownOp(3, 13, "lost-in-flight", "x"),
			ackedOp(0, 40, 50, c),
			readOp(1, 60, 70, 1, true, a, b, u, c),
		},
		"a producer retry answered from the table": {
			ackedOp(0, 0, 10, a),
			{Client: 1, Kind: opAppend, Call: 20, Return: 30, ID: "a", Slices: a.Slices, Outcome: outcomeOK, LSN: 1, Duplicate: true},
			readOp(2, 40, 50, 1, true, a),
		},
		"failed appends have no effect": {
			ackedOp(0, 0, 10, a), {Client: 1, Kind: opAppend, Call: 1, Return: 2, ID: "refused", Slices: []histSlice{{Topic: "x", Messages: 1}}, Outcome: outcomeFailed},
			readOp(2, 20, 30, 1, true, a),
		},
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := checkLinearizable(ops, linearizableConfig{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep)
		})
	}
}

// TestNotLinearizable feeds histories that break the log's promises; each
// must be reported, with its visualization written.
func TestNotLinearizable(t *testing.T) {
	l := newSeqLog()
	a := l.commit("a", "x")
	b := l.commit("b", "x")
	aAgain := histTxn{LSN: 3, ID: "a", Slices: []histSlice{{Topic: "x", FirstOffset: 2, Messages: 1}}}
	bAtOne := histTxn{LSN: 1, ID: "b", Slices: []histSlice{{Topic: "x", FirstOffset: 0, Messages: 1}}}
	for name, ops := range map[string][]histOp{
		// a was acknowledged at lsn 1; a later read finds b there and
		// nothing else: a is lost.
		"lost acknowledged write": {
			ackedOp(0, 0, 10, a), unknownOp(1, 5, "b", "x"), readOp(2, 20, 30, 1, true, bAtOne),
		},
		// a's single Append is in the log twice.
		"duplicated write": {
			ackedOp(0, 0, 10, a), ackedOp(1, 20, 30, b), readOp(2, 40, 50, 1, false, a, b, aAgain),
		},
		// a retry of a's producer sequence wrote again instead of being
		// answered from the table.
		"duplicated producer retry": {
			unknownOp(0, 0, "a", "x"), ackedOp(1, 5, 15, b),
			{Client: 0, Kind: opAppend, Call: 20, Return: 30, ID: "a", Slices: aAgain.Slices, Outcome: outcomeOK, LSN: 3},
		},
		// b completed before the read began, and the read to the head
		// does not see it: a stale read (a follower's or an old leader's).
		"stale read": {
			ackedOp(0, 0, 10, a), ackedOp(0, 20, 30, b), readOp(1, 40, 50, 1, true, a),
		},
		// a read returned a transaction whose Append began after the read
		// ended.
		"read from the future": {
			readOp(1, 0, 10, 1, false, a), ackedOp(0, 20, 30, a),
		},
		// LSN 2 skipped: not dense.
		"lsn gap": {
			ackedOp(0, 0, 10, a), ackedOp(0, 20, 30, histTxn{LSN: 3, ID: "b", Slices: b.Slices}),
		},
		// b's offset in x repeats a's.
		"offset reused": {
			ackedOp(0, 0, 10, a), ackedOp(0, 20, 30, histTxn{LSN: 2, ID: "b", Slices: a.Slices}),
		},
		// a duplicate answer that names another LSN than the first write.
		"duplicate answer with a wrong lsn": {
			ackedOp(0, 0, 10, a), ackedOp(0, 20, 30, b),
			{Client: 1, Kind: opAppend, Call: 40, Return: 50, ID: "a", Slices: a.Slices, Outcome: outcomeOK, LSN: 2, Duplicate: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			viz := filepath.Join(t.TempDir(), "violation.html")
			rep, err := checkLinearizable(ops, linearizableConfig{Timeout: time.Minute, Visualization: viz})
			if !errors.Is(err, errNotLinearizable) {
				t.Fatalf("got %v (%s), want ErrNotLinearizable", err, rep)
			}
			t.Log(err)
			html, rerr := os.ReadFile(viz)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if rep.Visualization != viz || !strings.Contains(string(html), "<html") || !strings.Contains(string(html), "append a") {
				t.Errorf("visualization %q: %d bytes, want the HTML with the operations", rep.Visualization, len(html))
			}
		})
	}
}

func TestMalformedOp(t *testing.T) {
	for name, op := range map[string]histOp{
		"no id":               {Kind: opAppend, Slices: []histSlice{{Topic: "x", Messages: 1}}, Outcome: outcomeOK, LSN: 1},
		"acked without lsn":   {Kind: opAppend, ID: "a", Slices: []histSlice{{Topic: "x", Messages: 1}}, Outcome: outcomeOK},
		"topic twice":         {Kind: opAppend, ID: "a", Slices: []histSlice{{Topic: "x", Messages: 1}, {Topic: "x", Messages: 1}}, Outcome: outcomeOK, LSN: 1},
		"returns before call": {Kind: opRead, Call: 5, Return: 1, From: 1, ToHead: true},
		"short range":         {Kind: opRead, From: 1, To: 2, Txns: []histTxn{{LSN: 1, ID: "a"}}},
		"head and range":      {Kind: opRead, From: 1, To: 2, ToHead: true, Txns: []histTxn{{LSN: 1, ID: "a"}}},
		"lsns not in order":   {Kind: opRead, From: 1, To: 2, Txns: []histTxn{{LSN: 2, ID: "a"}, {LSN: 1, ID: "b"}}},
		"no kind":             {},
	} {
		if _, err := checkLinearizable([]histOp{op}, linearizableConfig{}); !errors.Is(err, errMalformedOp) {
			t.Errorf("%s: %v, want ErrMalformedOp", name, err)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want outcome
	}{
		{nil, outcomeOK},
		{apierr.New(logstorepb.ErrorCode_NOT_LEADER, "follower", nil), outcomeFailed},
		{apierr.New(logstorepb.ErrorCode_QUEUE_FULL, "full", nil), outcomeFailed},
		{apierr.New(logstorepb.ErrorCode_CONDITION_FAILED, "lost the race", nil), outcomeFailed},
		{apierr.New(logstorepb.ErrorCode_TIMEOUT, "raft", nil), outcomeUnknown},
		{apierr.Status(apierr.ErrUnknownOutcome), outcomeUnknown},
		{status.Error(codes.Unavailable, "connection reset"), outcomeUnknown},
		{context.DeadlineExceeded, outcomeUnknown},
	} {
		if got := outcomeOf(c.err); got != c.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// simulateHistory writes a history of n operations by clients concurrent
// clients against a correct log: each op takes effect at its own instant,
// 10 ns apart, and its call and return are up to spread ns around it, so
// about 2*spread/10 operations overlap at any time. A fraction unknownP of
// the appends end with an unknown outcome (half of them took effect). One
// op in four is a read: a bounded range of up to 8 LSNs, or up to the head.
func simulateHistory(seed uint64, n, clients int, spread int64, unknownP float64) (ops []histOp, log []histTxn) {
	rng := rand.New(rand.NewPCG(seed, 0))
	l := newSeqLog()
	topics := []string{"t0", "t1", "t2", "t3"}
	for k := range n {
		at := int64(k+1) * 10
		call, ret := at-rng.Int64N(spread)-1, at+rng.Int64N(spread)+1
		client := k % clients
		if rng.IntN(4) == 0 && l.head > 0 {
			if rng.IntN(2) == 0 {
				from := l.head - min(l.head-1, rng.Uint64N(8))
				ops = append(ops, readOp(client, call, ret, from, true, l.txns[from-1:]...))
				continue
			}
			from := 1 + rng.Uint64N(l.head)
			to := min(l.head, from+rng.Uint64N(8))
			ops = append(ops, readOp(client, call, ret, from, false, l.txns[from-1:to]...))
			continue
		}
		id := fmt.Sprintf("txn-%d", k)
		picked := []string{topics[rng.IntN(len(topics))]}
		if rng.IntN(3) == 0 {
			if other := topics[rng.IntN(len(topics))]; other != picked[0] {
				picked = append(picked, other)
			}
		}
		if rng.Float64() < unknownP {
			ops = append(ops, unknownOp(client, call, id, picked...))
			if rng.IntN(2) == 0 {
				l.commit(id, picked...)
			}
			continue
		}
		ops = append(ops, ackedOp(client, call, ret, l.commit(id, picked...)))
	}
	return ops, l.txns
}

// TestLongHistory measures the checker on 20 000 operations of 8
// overlapping clients: with 1% unknown outcomes resolved from the final
// log, and with 0.1% left to the search (unresolved, an outcomeUnknown
// stays pending to the end and may be tried anywhere after its call; the
// top of histcheck_history_test.go has the figures); then the resolved
// history with one stale read.
func TestLongHistory(t *testing.T) {
	const n = 20000
	ops, log := simulateHistory(1, n, 8, 40, 0.01)
	resolved := resolveUnknown(ops, log)
	rep, err := checkLinearizable(resolved, linearizableConfig{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("resolved: %v", err)
	}
	t.Logf("resolved: %s", rep)
	few, _ := simulateHistory(2, n, 8, 40, 0.001)
	if rep, err = checkLinearizable(few, linearizableConfig{Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("unresolved: %v", err)
	}
	t.Logf("unresolved: %s", rep)

	// A read to the head, in the middle of the history, that misses the
	// last append it saw, and now starts well after that append returned.
	stale := append([]histOp{}, resolved...)
	for i := len(stale) / 2; i < len(stale); i++ {
		if r := stale[i]; r.Kind == opRead && r.ToHead && len(r.Txns) > 1 {
			r.Txns = r.Txns[:len(r.Txns)-1]
			r.To--
			r.Call += 1000
			r.Return = r.Call + 10
			stale[i] = r
			break
		}
	}
	rep, err = checkLinearizable(stale, linearizableConfig{Timeout: 2 * time.Minute})
	if !errors.Is(err, errNotLinearizable) {
		t.Fatalf("stale read in a long history: %v, want ErrNotLinearizable", err)
	}
	t.Logf("with a stale read: %s", rep)
}

func TestResolveUnknown(t *testing.T) {
	l := newSeqLog()
	a := l.commit("a", "x")
	u := l.commit("u", "x", "y")
	ops := resolveUnknown([]histOp{ackedOp(0, 0, 10, a), unknownOp(1, 5, "u", "y", "x"), unknownOp(2, 6, "gone", "x")}, l.txns)
	if got := ops[1]; got.Outcome != outcomeOK || !got.Resolved || got.LSN != 2 || got.Slices[0].FirstOffset != u.Slices[1].FirstOffset || got.Slices[1].FirstOffset != u.Slices[0].FirstOffset {
		t.Errorf("took effect: %+v, want OK at lsn 2 with the log's offsets", got)
	}
	if got := ops[2]; got.Outcome != outcomeFailed || !got.Resolved {
		t.Errorf("never took effect: %+v, want Failed", got)
	}
}
