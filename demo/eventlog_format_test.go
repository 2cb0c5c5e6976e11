package demo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// eventLogFormat1Fixture is an event log of format "logplayer-eventlog/1"
// written by the demo/eventlog.go of commit 0f677d1 (before the State
// moved to target/boltstate), kept as it was written: epoch 2 with log
// identity 6c6f67706c617931/0000000000000007 stored first (an Apply with
// no deliveries), then LSN 41 (orders: o1, o2; inventory: i1), then at
// epoch 3 a progress marker at 42 and LSN 43 (orders: o3 with key and a
// header).
const eventLogFormat1Fixture = "testdata/events-format1.db"

// fixtureDelivery is a delivery of one slice.
func fixtureDelivery(lsn types.LSN, topic string, first types.Offset, ms ...*logstorepb.Message) *targetpb.Delivery {
	return &targetpb.Delivery{Lsn: uint64(lsn), Slices: []*logstorepb.TxnSlice{{Topic: topic, FirstOffset: uint64(first), Messages: ms}}}
}

// TestEventLogOpensFormat1File: a file written by the older code reads
// back with its events and State, opens with that State and goes on
// applying into it.
func TestEventLogOpensFormat1File(t *testing.T) {
	b, err := os.ReadFile(eventLogFormat1Fixture)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), EventLogFileName)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st := target.State{AppliedLSN: 43, Epoch: 3,
		Topics:       map[string]types.Offset{OrdersTopic: 3, InventoryTopic: 1},
		LogClusterID: "6c6f67706c617931", LogIncarnation: "0000000000000007"}
	d41 := &targetpb.Delivery{Lsn: 41, Slices: []*logstorepb.TxnSlice{
		{Topic: OrdersTopic, Messages: []*logstorepb.Message{{Value: []byte("o1")}, {Value: []byte("o2")}}},
		{Topic: InventoryTopic, Messages: []*logstorepb.Message{{Value: []byte("i1")}}}}}
	d43 := fixtureDelivery(43, OrdersTopic, 2, &logstorepb.Message{Key: []byte("order-3"), Value: []byte("o3"),
		Headers: []*logstorepb.Header{{Key: "h", Value: []byte("v")}}})
	events, rst, err := ReadEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "ReadEventLog", rst, st)
	wantEvents(t, events, eventsOf(d41, d43))

	l := openEventLog(t, path)
	ost, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "OpenEventLog", ost, st)
	d44 := fixtureDelivery(44, InventoryTopic, 1, &logstorepb.Message{Value: []byte("i2")})
	next := nextState(st, d44)
	if err := l.Apply([]*targetpb.Delivery{d44}, next); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	events, rst, err = ReadEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "ReadEventLog after an Apply", rst, next)
	wantEvents(t, events, eventsOf(d41, d43, d44))
}
