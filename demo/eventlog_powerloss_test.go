package demo

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/internal/boltcrash"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// TestEventLogPowerLoss is the EventLog's twin of the shard's
// TestPowerLossPages. It applies a seeded log (groups of orders and
// inventory messages, progress markers, LSN gaps, and epoch-only Applies
// where another LogPlayer takes over) and records the file after every
// Apply, one fsynced bbolt commit. For 128 seeds it builds a crash image
// between two consecutive commits with internal/boltcrash (its package doc
// says what a power loss may leave in that model), opens it with
// OpenEventLog and checks that it opens (no error, no panic) at exactly
// the State of one of the two commits (the old one for "data pages only",
// the new one for "whole commit"), that its events are exactly the log's
// up to that State's applied LSN, and that redelivering from AppliedLSN+1
// under a new epoch, as a restarted LogPlayer does, through Apply, ends
// with every event of the log once and the State of the whole log.
//
// The model holds one bbolt commit between two recorded files, so the test
// first fails an Apply that is not exactly one bbolt commit (events and
// State in separate transactions): from the files around it the model
// would build images no disk can hold.
func TestEventLogPowerLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	path := filepath.Join(t.TempDir(), EventLogFileName)
	l := openEventLog(t, path)
	pageSize := l.db.Info().PageSize
	var files [][]byte        // the file after each commit
	var states []target.State // its State
	snap := func(st target.State) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files, states = append(files, b), append(states, st)
	}
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	snap(st)
	txid := func() int {
		var id int
		if err := l.db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	apply := func(ds []*targetpb.Delivery, next target.State) {
		t.Helper()
		before := txid()
		if err := l.Apply(ds, next); err != nil {
			t.Fatal(err)
		}
		if n := txid() - before; n != 1 {
			t.Fatalf("Apply up to lsn %d epoch %d took %d bbolt commits, want 1: its events and State are not one transaction, "+
				"and crash images between the files before and after it would not be ones a disk can hold", next.AppliedLSN, next.Epoch, n)
		}
		st = next
		snap(next)
	}
	gen := targettest.NewLog()
	var all []*targetpb.Delivery
	for i := range 60 {
		if i == 0 || rng.IntN(8) == 0 { // a LogPlayer (re)starts or takes over
			next := st.Clone()
			next.Epoch++
			apply(nil, next)
		}
		b := genEventGroup(rng, gen)
		all = append(all, b...)
		apply(b, nextState(st, b...))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lastEpoch := st.Epoch

	for seed := range uint64(128) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xe7e7))
			k, img, shape := boltcrash.Between(rng, files, pageSize)
			old, new := states[k], states[k+1]
			where := fmt.Sprintf("seed %d: %s between the commits at lsn %d epoch %d and lsn %d epoch %d",
				seed, shape, old.AppliedLSN, old.Epoch, new.AppliedLSN, new.Epoch)
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: panic: %v", where, r)
				}
			}()
			crashPath := filepath.Join(t.TempDir(), EventLogFileName)
			if err := os.WriteFile(crashPath, img, 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := OpenEventLog(crashPath)
			if err != nil {
				t.Fatalf("%s: open: %v", where, err)
			}
			got, err := l.State()
			if err != nil {
				l.Close()
				t.Fatalf("%s: State: %v", where, err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			at := "old"
			switch {
			case sameState(got, old):
			case sameState(got, new):
				at = "new"
			default:
				t.Fatalf("%s: opened at state %+v, neither %+v nor %+v", where, got, old, new)
			}
			t.Logf("%s: opened at the %s one", where, at)
			if shape == boltcrash.DataPagesOnly && at != "old" || shape == boltcrash.WholeCommit && at != "new" {
				t.Fatalf("%s: opened at the %s commit", where, at)
			}
			events, rst, err := ReadEventLog(crashPath)
			if err != nil {
				t.Fatalf("%s: ReadEventLog: %v", where, err)
			}
			wantState(t, where+": ReadEventLog", rst, got)
			wantLogEvents(t, where+": after the crash", events, eventsOf(upTo(all, got.AppliedLSN)...))

			// Redeliver from AppliedLSN+1 as a restarted LogPlayer does: a
			// new epoch stored before the HelloAck, then the rest of the
			// log in other groups than the first time (without fsyncs:
			// only the result is checked here).
			l = openEventLog(t, crashPath)
			defer l.Close()
			l.db.NoSync = true
			next := got.Clone()
			next.Epoch = lastEpoch + 1
			if err := l.Apply(nil, next); err != nil {
				t.Fatal(err)
			}
			rest := all[len(upTo(all, got.AppliedLSN)):]
			for len(rest) > 0 {
				n := min(len(rest), 1+rng.IntN(8))
				b := rest[:n]
				rest = rest[n:]
				checkContinuity(t, where, next, b)
				next = nextState(next, b...)
				if err := l.Apply(b, next); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			events, rst, err = ReadEventLog(crashPath)
			if err != nil {
				t.Fatal(err)
			}
			want := nextState(target.State{Topics: map[string]types.Offset{}}, all...)
			want.Epoch = lastEpoch + 1
			wantState(t, where+": after redelivery", rst, want)
			wantLogEvents(t, where+": after redelivery", events, eventsOf(all...))
		})
	}
}

// genEventGroup makes a group of 1 to 6 deliveries on gen: transactions
// of 1 to 3 messages of about 250 bytes to orders, inventory or both
// (some with a key and a header), progress markers and LSN gaps.
func genEventGroup(rng *rand.Rand, gen *targettest.Log) []*targetpb.Delivery {
	var out []*targetpb.Delivery
	for range 1 + rng.IntN(6) {
		gen.SkipLSNs(uint64(rng.IntN(3)))
		if rng.IntN(12) == 0 {
			out = append(out, gen.Progress())
			continue
		}
		lsn := gen.LSN() + 1
		var parts []targettest.Part
		for _, topic := range []string{OrdersTopic, InventoryTopic} {
			if rng.IntN(3) == 0 {
				continue
			}
			var vals [][]byte
			for j := range 1 + rng.IntN(3) {
				vals = append(vals, fmt.Appendf(bytes.Repeat([]byte("e"), 250), "%s/%d/%d", topic, lsn, j))
			}
			parts = append(parts, targettest.Part{Topic: topic, Values: vals})
		}
		if len(parts) == 0 {
			parts = append(parts, targettest.Part{Topic: OrdersTopic, Values: [][]byte{fmt.Appendf(nil, "order/%d", lsn)}})
		}
		d := gen.Txn(parts...)
		if rng.IntN(3) == 0 {
			m := d.Slices[0].Messages[0]
			m.Key = fmt.Appendf(nil, "key-%d", lsn)
			m.Headers = []*logstorepb.Header{{Key: "source", Value: []byte("powerloss")}}
		}
		out = append(out, d)
	}
	return out
}

// upTo is the prefix of ds up to lsn.
func upTo(ds []*targetpb.Delivery, lsn types.LSN) []*targetpb.Delivery {
	n := 0
	for n < len(ds) && types.LSN(ds[n].Lsn) <= lsn {
		n++
	}
	return ds[:n]
}

// wantLogEvents is wantEvents with a short message when the counts differ:
// how far each reaches.
func wantLogEvents(t *testing.T, where string, got, want []Event) {
	t.Helper()
	last := func(es []Event) types.LSN {
		if len(es) == 0 {
			return 0
		}
		return es[len(es)-1].LSN
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d events up to lsn %d, want %d up to lsn %d", where, len(got), last(got), len(want), last(want))
	}
	wantEvents(t, got, want)
}

// checkContinuity fails unless b follows on from st as the target SDK
// requires before it calls Apply: LSNs above the applied one and each
// slice at its topic's next offset.
func checkContinuity(t *testing.T, where string, st target.State, b []*targetpb.Delivery) {
	t.Helper()
	st = st.Clone()
	for _, d := range b {
		if types.LSN(d.Lsn) <= st.AppliedLSN {
			t.Fatalf("%s: redelivery of lsn %d at applied lsn %d", where, d.Lsn, st.AppliedLSN)
		}
		for _, s := range d.Slices {
			if types.Offset(s.FirstOffset) != st.Topics[s.Topic] {
				t.Fatalf("%s: lsn %d starts %s at offset %d, the State's next offset is %d", where, d.Lsn, s.Topic, s.FirstOffset, st.Topics[s.Topic])
			}
		}
		st = nextState(st, d)
	}
}
