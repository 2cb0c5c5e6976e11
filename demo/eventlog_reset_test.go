package demo

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// TestResetEventLog: ResetEventLog removes the log identity, moves the
// position back (deleting the events above it, recomputing the topics'
// positions) and the epoch; a dry run and refused resets change nothing;
// a real target.Server on the reset file takes the next log's Hello and
// continues from the reset position.
func TestResetEventLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventLogFileName)
	gen := targettest.NewLog()
	d1 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o1")}})
	d2 := gen.Txn(targettest.Part{Topic: InventoryTopic, Values: [][]byte{[]byte("r1"), []byte("r2")}})
	d3 := gen.Progress()
	d4 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o2")}},
		targettest.Part{Topic: "audit", Values: [][]byte{[]byte("a1")}})
	st := nextState(target.State{Topics: map[string]types.Offset{}, Epoch: 7, LogClusterID: "c1", LogIncarnation: "i1"}, d1, d2, d3, d4)
	l := openEventLog(t, path)
	if err := l.Apply([]*targetpb.Delivery{d1, d2, d3, d4}, st); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lsn, epoch := func(v types.LSN) *types.LSN { return &v }, func(v types.Epoch) *types.Epoch { return &v }
	unchanged := func(what string) {
		t.Helper()
		events, got, err := ReadEventLog(path)
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, what, got, st)
		wantEvents(t, events, eventsOf(d1, d2, d4))
	}

	// Refused: the file is open (the target runs), a position or an epoch
	// above the stored one.
	l = openEventLog(t, path)
	if _, err := ResetEventLog(path, EventLogReset{}); err == nil || !strings.Contains(err.Error(), "stop the target first") {
		t.Fatalf("reset of an open file: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []EventLogReset{{LSN: lsn(5)}, {Epoch: epoch(8)}, {LSN: lsn(1), Epoch: epoch(8)}} {
		if _, err := ResetEventLog(path, r); !errors.Is(err, ErrBadReset) {
			t.Fatalf("reset %+v: %v, want ErrBadReset", r, err)
		}
		unchanged("after a refused reset")
	}

	want := target.State{AppliedLSN: 2, Epoch: 3, Topics: map[string]types.Offset{OrdersTopic: 1, InventoryTopic: 2}}
	res, err := ResetEventLog(path, EventLogReset{LSN: lsn(2), Epoch: epoch(3), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "dry run's before", res.Before, st)
	wantState(t, "dry run's after", res.After, want)
	if res.Removed != 1 {
		t.Fatalf("dry run: %d events removed, want 1", res.Removed)
	}
	unchanged("after a dry run")

	if res, err = ResetEventLog(path, EventLogReset{LSN: lsn(2), Epoch: epoch(3)}); err != nil || res.Removed != 1 {
		t.Fatalf("reset: %v (%+v)", err, res)
	}
	events, got, err := ReadEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "after the reset", got, want)
	wantEvents(t, events, eventsOf(d1, d2))

	// A target.Server on the reset file takes another log's Hello at a
	// lower epoch, answers the reset position and applies what follows it.
	cc := serveEventLog(t, path)
	h := targettest.Hello("events", 4, 1)
	h.LogClusterId, h.LogIncarnation = "c1", "i2"
	snd, ack, err := targettest.Open(targettest.Context(t), cc, h)
	if err != nil {
		t.Fatal(err)
	}
	if ack.AppliedLsn != 2 || ack.LogIncarnation != "i2" {
		t.Fatalf("HelloAck after the reset: %v", ack)
	}
	next := targettest.NewLog()
	next.SkipLSNs(2)
	d3b := next.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o2'")}})
	d3b.Slices[0].FirstOffset = 1
	if err := snd.Send(d3b); err != nil {
		t.Fatal(err)
	}
	if err := snd.WaitAck(targettest.Context(t), 3); err != nil {
		t.Fatalf("delivery after the reset: %v", err)
	}
	if _, _, err := targettest.Open(targettest.Context(t), cc, targettest.Hello("events", 4, 2)); err != nil {
		t.Fatal(err)
	}
	h.Session, h.LogIncarnation = 3, "i1"
	if _, _, err := targettest.Open(targettest.Context(t), cc, h); target.Detail(err).GetCode() != logstorepb.ErrorCode_OTHER_LOG {
		t.Fatalf("Hello of the old incarnation after the reset: %v, want OTHER_LOG", err)
	}
}
