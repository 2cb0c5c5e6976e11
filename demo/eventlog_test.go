package demo

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// eventsOf lists the events ds carry, in order: what an EventLog that
// applied them must return.
func eventsOf(ds ...*targetpb.Delivery) []Event {
	var out []Event
	for _, d := range ds {
		for _, s := range d.Slices {
			for i, m := range s.Messages {
				out = append(out, Event{LSN: types.LSN(d.Lsn), Topic: s.Topic, Offset: types.Offset(s.FirstOffset + uint64(i)), Message: m})
			}
		}
	}
	return out
}

// nextState is st advanced over ds, as the target SDK computes it.
func nextState(st target.State, ds ...*targetpb.Delivery) target.State {
	st = st.Clone()
	for _, d := range ds {
		st.AppliedLSN = types.LSN(d.Lsn)
		for _, s := range d.Slices {
			st.Topics[s.Topic] = types.Offset(s.FirstOffset + uint64(len(s.Messages)))
		}
	}
	return st
}

func wantEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.LSN != w.LSN || g.Topic != w.Topic || g.Offset != w.Offset || !proto.Equal(g.Message, w.Message) {
			t.Fatalf("event %d is lsn %d %s@%d %v, want lsn %d %s@%d %v", i, g.LSN, g.Topic, g.Offset, g.Message, w.LSN, w.Topic, w.Offset, w.Message)
		}
	}
}

func wantState(t *testing.T, what string, got, want target.State) {
	t.Helper()
	if !sameState(got, want) {
		t.Fatalf("%s: state %+v, want %+v", what, got, want)
	}
}

// sameState reports whether a and b are the same State.
func sameState(a, b target.State) bool {
	return a.AppliedLSN == b.AppliedLSN && a.Epoch == b.Epoch && maps.Equal(a.Topics, b.Topics) &&
		a.LogClusterID == b.LogClusterID && a.LogIncarnation == b.LogIncarnation
}

func openEventLog(t *testing.T, path string) *EventLog {
	t.Helper()
	l, err := OpenEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEventLogRoundTrip applies groups with messages (keys, headers, two
// topics), progress markers and an epoch-only change across reopens: the
// State survives each reopen, and ReadEventLog returns exactly the
// messages, in LSN order (past LSN 255, where a little-endian key would
// sort wrong), with their offsets.
func TestEventLogRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventLogFileName)
	gen := targettest.NewLog()
	l := openEventLog(t, path)
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "new file", st, target.State{Topics: map[string]types.Offset{}})

	d1 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o1")}},
		targettest.Part{Topic: InventoryTopic, Values: [][]byte{[]byte("r1"), []byte("r2")}})
	d1.Slices[0].Messages[0].Key = []byte("txn-1")
	d1.Slices[0].Messages[0].Headers = []*logstorepb.Header{{Key: "source", Value: []byte("test")}}
	d2 := gen.Progress()
	g1 := []*targetpb.Delivery{d1, d2}
	st = nextState(st, g1...)
	st.Epoch = 3
	if err := l.Apply(g1, st); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openEventLog(t, path)
	got, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "after reopen", got, st)
	// A takeover: only the epoch changes.
	st = st.Clone()
	st.Epoch = 5
	if err := l.Apply(nil, st); err != nil {
		t.Fatal(err)
	}
	gen.SkipLSNs(300)
	d3 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o2"), []byte("o3")}})
	gen.SkipLSNs(1)
	d4 := gen.Txn(targettest.Part{Topic: InventoryTopic, Values: [][]byte{[]byte("r3")}})
	g2 := []*targetpb.Delivery{d3, d4}
	st = nextState(st, g2...)
	if err := l.Apply(g2, st); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	events, rst, err := ReadEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "ReadEventLog", rst, st)
	wantEvents(t, events, eventsOf(d1, d3, d4))
	if rst.AppliedLSN != 305 || rst.Topics[OrdersTopic] != 3 || rst.Topics[InventoryTopic] != 3 {
		t.Fatalf("state %+v", rst)
	}
	l = openEventLog(t, path)
	defer l.Close()
	if got, err = l.State(); err != nil {
		t.Fatal(err)
	}
	wantState(t, "second reopen", got, st)
}

// TestEventLogFailedApply: an Apply whose bbolt transaction fails after
// its events were written (an offsets key bbolt refuses) returns the error
// and leaves neither the events nor the State; the next Apply succeeds.
func TestEventLogFailedApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventLogFileName)
	gen := targettest.NewLog()
	l := openEventLog(t, path)
	d1 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o1")}})
	st := nextState(target.State{Topics: map[string]types.Offset{}}, d1)
	st.Epoch = 1
	if err := l.Apply([]*targetpb.Delivery{d1}, st); err != nil {
		t.Fatal(err)
	}

	d2 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o2")}})
	bad := nextState(st, d2)
	bad.Epoch = 2
	bad.Topics[""] = 1 // bbolt: key required
	if err := l.Apply([]*targetpb.Delivery{d2}, bad); !errors.Is(err, berrors.ErrKeyRequired) {
		t.Fatalf("Apply with an empty topic: %v, want bbolt's key required", err)
	}
	got, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "after the failed Apply", got, st)

	good := nextState(st, d2)
	good.Epoch = 2
	if err := l.Apply([]*targetpb.Delivery{d2}, good); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	events, rst, err := ReadEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "ReadEventLog", rst, good)
	wantEvents(t, events, eventsOf(d1, d2))

	// The failed Apply's events are not there either before the retry.
	l = openEventLog(t, path)
	defer l.Close()
	d3 := gen.Txn(targettest.Part{Topic: InventoryTopic, Values: [][]byte{[]byte("r1")}})
	bad = nextState(good, d3)
	bad.Topics[""] = 1
	if err := l.Apply([]*targetpb.Delivery{d3}, bad); err == nil {
		t.Fatal("Apply with an empty topic succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	events, rst, err = ReadEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "ReadEventLog after a failed Apply", rst, good)
	wantEvents(t, events, eventsOf(d1, d2))
}

// TestEventLogRefusesForeignFiles: OpenEventLog and ReadEventLog refuse a
// file that is no bbolt database, a shard's file and a bbolt file of
// another layout with ErrNotEventLog, and leave them as they were; a shard
// refuses an event log.
func TestEventLogRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a bbolt file "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}

	shardDir := filepath.Join(dir, "shard")
	sh, err := shard.Open(shard.Config{Dir: shardDir, ID: "shard-0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(dir, "other.db")
	db, err := bbolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("things")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{garbage, filepath.Join(shardDir, shard.FileName), other} {
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if l, err := OpenEventLog(path); !errors.Is(err, ErrNotEventLog) {
			if l != nil {
				l.Close()
			}
			t.Fatalf("OpenEventLog(%s): %v, want ErrNotEventLog", path, err)
		}
		if _, _, err := ReadEventLog(path); !errors.Is(err, ErrNotEventLog) {
			t.Fatalf("ReadEventLog(%s): %v, want ErrNotEventLog", path, err)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("%s changed by a refused open", path)
		}
	}

	// And the other way round: a shard refuses an event log.
	evDir := filepath.Join(dir, "events")
	if err := os.Mkdir(evDir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := openEventLog(t, filepath.Join(evDir, shard.FileName))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if sh, err := shard.Open(shard.Config{Dir: evDir, ID: "shard-0"}); !errors.Is(err, shard.ErrCorrupt) {
		if sh != nil {
			sh.Close()
		}
		t.Fatalf("shard.Open of an event log: %v, want shard.ErrCorrupt", err)
	}
}
