package histcheck

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
	txns []Txn // txns[lsn-1]
}

func newSeqLog() *seqLog { return &seqLog{next: map[string]uint64{}} }

// commit appends id writing one message to each topic and returns the
// transaction with its LSN and offsets.
func (l *seqLog) commit(id string, topics ...string) Txn {
	l.head++
	t := Txn{LSN: l.head, ID: id}
	for _, topic := range topics {
		t.Slices = append(t.Slices, Slice{Topic: topic, FirstOffset: l.next[topic], Messages: 1})
		l.next[topic]++
	}
	l.txns = append(l.txns, t)
	return t
}

// acked is the Append op that t's commit acknowledged, over [call, ret].
func acked(client int, call, ret int64, t Txn) Op {
	return Op{Client: client, Kind: KindAppend, Call: call, Return: ret, ID: t.ID, Slices: t.Slices, Outcome: OK, LSN: t.LSN}
}

// unknown is an Append of id to topics (one message each) whose outcome is
// unknown.
func unknown(client int, call int64, id string, topics ...string) Op {
	op := Op{Client: client, Kind: KindAppend, Call: call, ID: id, Outcome: Unknown}
	for _, t := range topics {
		op.Slices = append(op.Slices, Slice{Topic: t, Messages: 1})
	}
	return op
}

// read is a Read of [from, from+len(txns)-1] that returned txns.
func read(client int, call, ret int64, from uint64, toHead bool, txns ...Txn) Op {
	return Op{Client: client, Kind: KindRead, Call: call, Return: ret, From: from, To: from + uint64(len(txns)) - 1, ToHead: toHead, Txns: txns}
}

func TestLinearizable(t *testing.T) {
	l := newSeqLog()
	a := l.commit("a", "x")
	b := l.commit("b", "x", "y") // concurrent with a's append and a read
	u := l.commit("u", "y")      // an unknown outcome that took effect
	c := l.commit("c", "x")
	for name, ops := range map[string][]Op{
		"sequential": {
			acked(0, 0, 10, a), acked(0, 20, 30, b), read(1, 40, 50, 1, true, a, b),
		},
		"concurrent": {
			acked(0, 0, 100, a), acked(1, 10, 20, b), read(2, 15, 25, 1, false, a, b), read(3, 5, 8, 1, true),
		},
		"unknown outcomes, one took effect and one did not": {
			acked(0, 0, 10, a), acked(1, 5, 15, b),
			unknown(2, 12, "u", "y"), unknown(3, 13, "lost-in-flight", "x"),
			acked(0, 40, 50, c),
			read(1, 60, 70, 1, true, a, b, u, c),
		},
		"a producer retry answered from the table": {
			acked(0, 0, 10, a),
			{Client: 1, Kind: KindAppend, Call: 20, Return: 30, ID: "a", Slices: a.Slices, Outcome: OK, LSN: 1, Duplicate: true},
			read(2, 40, 50, 1, true, a),
		},
		"failed appends have no effect": {
			acked(0, 0, 10, a), {Client: 1, Kind: KindAppend, Call: 1, Return: 2, ID: "refused", Slices: []Slice{{Topic: "x", Messages: 1}}, Outcome: Failed},
			read(2, 20, 30, 1, true, a),
		},
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := CheckLinearizable(ops, LinearizableConfig{Timeout: time.Minute})
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
	aAgain := Txn{LSN: 3, ID: "a", Slices: []Slice{{Topic: "x", FirstOffset: 2, Messages: 1}}}
	bAtOne := Txn{LSN: 1, ID: "b", Slices: []Slice{{Topic: "x", FirstOffset: 0, Messages: 1}}}
	for name, ops := range map[string][]Op{
		// a was acknowledged at lsn 1; a later read finds b there and
		// nothing else: a is lost.
		"lost acknowledged write": {
			acked(0, 0, 10, a), unknown(1, 5, "b", "x"), read(2, 20, 30, 1, true, bAtOne),
		},
		// a's single Append is in the log twice.
		"duplicated write": {
			acked(0, 0, 10, a), acked(1, 20, 30, b), read(2, 40, 50, 1, false, a, b, aAgain),
		},
		// a retry of a's producer sequence wrote again instead of being
		// answered from the table.
		"duplicated producer retry": {
			unknown(0, 0, "a", "x"), acked(1, 5, 15, b),
			{Client: 0, Kind: KindAppend, Call: 20, Return: 30, ID: "a", Slices: aAgain.Slices, Outcome: OK, LSN: 3},
		},
		// b completed before the read began, and the read to the head
		// does not see it: a stale read (a follower's or an old leader's).
		"stale read": {
			acked(0, 0, 10, a), acked(0, 20, 30, b), read(1, 40, 50, 1, true, a),
		},
		// a read returned a transaction whose Append began after the read
		// ended.
		"read from the future": {
			read(1, 0, 10, 1, false, a), acked(0, 20, 30, a),
		},
		// LSN 2 skipped: not dense.
		"lsn gap": {
			acked(0, 0, 10, a), acked(0, 20, 30, Txn{LSN: 3, ID: "b", Slices: b.Slices}),
		},
		// b's offset in x repeats a's.
		"offset reused": {
			acked(0, 0, 10, a), acked(0, 20, 30, Txn{LSN: 2, ID: "b", Slices: a.Slices}),
		},
		// a duplicate answer that names another LSN than the first write.
		"duplicate answer with a wrong lsn": {
			acked(0, 0, 10, a), acked(0, 20, 30, b),
			{Client: 1, Kind: KindAppend, Call: 40, Return: 50, ID: "a", Slices: a.Slices, Outcome: OK, LSN: 2, Duplicate: true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			viz := filepath.Join(t.TempDir(), "violation.html")
			rep, err := CheckLinearizable(ops, LinearizableConfig{Timeout: time.Minute, Visualization: viz})
			if !errors.Is(err, ErrNotLinearizable) {
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

func TestMalformed(t *testing.T) {
	for name, op := range map[string]Op{
		"no id":               {Kind: KindAppend, Slices: []Slice{{Topic: "x", Messages: 1}}, Outcome: OK, LSN: 1},
		"acked without lsn":   {Kind: KindAppend, ID: "a", Slices: []Slice{{Topic: "x", Messages: 1}}, Outcome: OK},
		"topic twice":         {Kind: KindAppend, ID: "a", Slices: []Slice{{Topic: "x", Messages: 1}, {Topic: "x", Messages: 1}}, Outcome: OK, LSN: 1},
		"returns before call": {Kind: KindRead, Call: 5, Return: 1, From: 1, ToHead: true},
		"short range":         {Kind: KindRead, From: 1, To: 2, Txns: []Txn{{LSN: 1, ID: "a"}}},
		"head and range":      {Kind: KindRead, From: 1, To: 2, ToHead: true, Txns: []Txn{{LSN: 1, ID: "a"}}},
		"lsns not in order":   {Kind: KindRead, From: 1, To: 2, Txns: []Txn{{LSN: 2, ID: "a"}, {LSN: 1, ID: "b"}}},
		"no kind":             {},
	} {
		if _, err := CheckLinearizable([]Op{op}, LinearizableConfig{}); !errors.Is(err, ErrMalformedOp) {
			t.Errorf("%s: %v, want ErrMalformedOp", name, err)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{nil, OK},
		{apierr.New(logstorepb.ErrorCode_NOT_LEADER, "follower", nil), Failed},
		{apierr.New(logstorepb.ErrorCode_QUEUE_FULL, "full", nil), Failed},
		{apierr.New(logstorepb.ErrorCode_CONDITION_FAILED, "lost the race", nil), Failed},
		{apierr.New(logstorepb.ErrorCode_TIMEOUT, "raft", nil), Unknown},
		{apierr.Status(apierr.ErrUnknownOutcome), Unknown},
		{status.Error(codes.Unavailable, "connection reset"), Unknown},
		{context.DeadlineExceeded, Unknown},
	} {
		if got := OutcomeOf(c.err); got != c.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// simulate writes a history of n operations by clients concurrent clients
// against a correct log: each op takes effect at its own instant, 10 ns
// apart, and its call and return are up to spread ns around it, so about
// 2*spread/10 operations overlap at any time. A fraction unknownP of the
// appends end with an unknown outcome (half of them took effect). One op in
// four is a read: a bounded range of up to 8 LSNs, or up to the head.
func simulate(seed uint64, n, clients int, spread int64, unknownP float64) (ops []Op, log []Txn) {
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
				ops = append(ops, read(client, call, ret, from, true, l.txns[from-1:]...))
				continue
			}
			from := 1 + rng.Uint64N(l.head)
			to := min(l.head, from+rng.Uint64N(8))
			ops = append(ops, read(client, call, ret, from, false, l.txns[from-1:to]...))
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
			ops = append(ops, unknown(client, call, id, picked...))
			if rng.IntN(2) == 0 {
				l.commit(id, picked...)
			}
			continue
		}
		ops = append(ops, acked(client, call, ret, l.commit(id, picked...)))
	}
	return ops, l.txns
}

// TestLongHistory measures the checker on 20 000 operations of 8
// overlapping clients: with 1% unknown outcomes resolved from the final
// log, and with 0.1% left to the search (unresolved, an Unknown stays
// pending to the end and may be tried anywhere after its call; the package
// doc has the figures); then the resolved history with one stale read.
func TestLongHistory(t *testing.T) {
	const n = 20000
	ops, log := simulate(1, n, 8, 40, 0.01)
	resolved := Resolve(ops, log)
	rep, err := CheckLinearizable(resolved, LinearizableConfig{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("resolved: %v", err)
	}
	t.Logf("resolved: %s", rep)
	few, _ := simulate(2, n, 8, 40, 0.001)
	if rep, err = CheckLinearizable(few, LinearizableConfig{Timeout: 2 * time.Minute}); err != nil {
		t.Fatalf("unresolved: %v", err)
	}
	t.Logf("unresolved: %s", rep)

	// A read to the head, in the middle of the history, that misses the
	// last append it saw, and now starts well after that append returned.
	stale := append([]Op{}, resolved...)
	for i := len(stale) / 2; i < len(stale); i++ {
		if r := stale[i]; r.Kind == KindRead && r.ToHead && len(r.Txns) > 1 {
			r.Txns = r.Txns[:len(r.Txns)-1]
			r.To--
			r.Call += 1000
			r.Return = r.Call + 10
			stale[i] = r
			break
		}
	}
	rep, err = CheckLinearizable(stale, LinearizableConfig{Timeout: 2 * time.Minute})
	if !errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("stale read in a long history: %v, want ErrNotLinearizable", err)
	}
	t.Logf("with a stale read: %s", rep)
}

func TestResolve(t *testing.T) {
	l := newSeqLog()
	a := l.commit("a", "x")
	u := l.commit("u", "x", "y")
	ops := Resolve([]Op{acked(0, 0, 10, a), unknown(1, 5, "u", "y", "x"), unknown(2, 6, "gone", "x")}, l.txns)
	if got := ops[1]; got.Outcome != OK || !got.Resolved || got.LSN != 2 || got.Slices[0].FirstOffset != u.Slices[1].FirstOffset || got.Slices[1].FirstOffset != u.Slices[0].FirstOffset {
		t.Errorf("took effect: %+v, want OK at lsn 2 with the log's offsets", got)
	}
	if got := ops[2]; got.Outcome != Failed || !got.Resolved {
		t.Errorf("never took effect: %+v, want Failed", got)
	}
}
