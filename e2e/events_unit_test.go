package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// errorsTB records what a check reports instead of failing the test.
type errorsTB struct {
	testing.TB
	errs []string
}

func (r *errorsTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *errorsTB) Logf(string, ...any) {}
func (r *errorsTB) Helper()             {}

// TestCheckEventsCatches: checkEvents passes an events file that holds
// exactly the log's orders and inventory messages, with its State at the
// head and the expected epoch, and reports a missing event, a duplicate,
// a changed value, a State short of the head and a wrong epoch.
func TestCheckEventsCatches(t *testing.T) {
	// The log: 4 transactions, each with an order and a reservation but
	// LSN 3 (a progress marker for the events target).
	f := &logFacts{model: demo.NewModel()}
	var txns []*logstorepb.Transaction
	for lsn := uint64(1); lsn <= 4; lsn++ {
		tx := &logstorepb.Transaction{Lsn: lsn}
		if lsn != 3 {
			n := uint64(len(f.events) / 2)
			tx.Slices = []*logstorepb.TxnSlice{
				{Topic: demo.OrdersTopic, FirstOffset: n, Messages: []*logstorepb.Message{{Key: []byte(fmt.Sprint("t", lsn)), Value: []byte("order")}}},
				{Topic: demo.InventoryTopic, FirstOffset: n, Messages: []*logstorepb.Message{{Key: []byte(fmt.Sprint("t", lsn)), Value: []byte("reservation")}}},
			}
		}
		if err := f.model.Apply(tx); err != nil {
			t.Fatal(err)
		}
		f.events = appendEvents(f.events, tx)
		txns = append(txns, tx)
	}
	const head, epoch = 4, 7
	epochOf := func(string) (uint64, string) { return epoch, "the test's" }

	// write makes an events file that applied ds (each delivery's slices
	// as given) and then State st.
	write := func(ds []*targetpb.Delivery, st target.State) *eventsNode {
		t.Helper()
		e := &eventsNode{id: eventsTarget, dir: t.TempDir()}
		l, err := demo.OpenEventLog(filepath.Join(e.dir, demo.EventLogFileName))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Apply(ds, st); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return e
	}
	good := target.State{AppliedLSN: head, Epoch: epoch, Topics: map[string]types.Offset{demo.OrdersTopic: 3, demo.InventoryTopic: 3}}
	deliveries := func(edit func(lsn uint64, s []*logstorepb.TxnSlice) []*logstorepb.TxnSlice) []*targetpb.Delivery {
		var ds []*targetpb.Delivery
		for _, tx := range txns {
			ds = append(ds, &targetpb.Delivery{Lsn: tx.Lsn, Slices: edit(tx.Lsn, tx.Slices)})
		}
		return ds
	}
	same := func(_ uint64, s []*logstorepb.TxnSlice) []*logstorepb.TxnSlice { return s }

	for _, tc := range []struct {
		name string
		ds   []*targetpb.Delivery
		st   target.State
		want string // "" : no error
	}{
		{"exact", deliveries(same), good, ""},
		{"missing", deliveries(func(lsn uint64, s []*logstorepb.TxnSlice) []*logstorepb.TxnSlice {
			if lsn == 2 {
				return s[:1]
			}
			return s
		}), good, "events differ"},
		{"duplicate", deliveries(func(lsn uint64, s []*logstorepb.TxnSlice) []*logstorepb.TxnSlice {
			if lsn == 4 {
				return append(s, s[0])
			}
			return s
		}), good, "events differ"},
		{"changed value", deliveries(func(lsn uint64, s []*logstorepb.TxnSlice) []*logstorepb.TxnSlice {
			if lsn == 1 {
				return []*logstorepb.TxnSlice{s[0], {Topic: s[1].Topic, FirstOffset: s[1].FirstOffset, Messages: []*logstorepb.Message{{Key: []byte("t1"), Value: []byte("other")}}}}
			}
			return s
		}), good, "events differ"},
		{"short of the head", deliveries(same), target.State{AppliedLSN: head - 1, Epoch: epoch, Topics: good.Topics}, "want the head"},
		{"wrong epoch", deliveries(same), target.State{AppliedLSN: head, Epoch: epoch - 1, Topics: good.Topics}, "durable epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := write(tc.ds, tc.st)
			rec := &errorsTB{TB: t}
			checkEvents(rec, e, f, head, epochOf)
			got := strings.Join(rec.errs, "\n")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("checkEvents reported %q, want %q", got, tc.want)
			}
		})
	}
}
