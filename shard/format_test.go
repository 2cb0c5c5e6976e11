package shard_test

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// format1Fixture is a shard file of layout format 1 written by the
// shard/store.go of commit 0f677d1 (before the State moved to
// target/boltstate), kept as it was written: topics orders and inventory,
// epoch 2 with log identity 6c6f67706c617931/0000000000000007 stored
// first (an Apply with no deliveries), then LSN 41 (orders: PUT k1, PUT
// k2; inventory: PUT i1), then at epoch 3 a progress marker at 42 and
// LSN 43 (orders: DELETE k1, PUT k3).
const format1Fixture = "testdata/format1/" + shard.FileName

var format1State = target.State{
	AppliedLSN:     43,
	Epoch:          3,
	Topics:         map[string]types.Offset{"orders": 4, "inventory": 1},
	LogClusterID:   "6c6f67706c617931",
	LogIncarnation: "0000000000000007",
}

var format1Data = map[string][]byte{"k2": []byte("v2"), "k3": []byte("v3"), "i1": []byte("10")}

// copyFixture copies the file at src into a new directory as the shard's
// file and returns the directory.
func copyFixture(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, shard.FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func wantDirHolds(t *testing.T, dir string, data map[string][]byte, st target.State) {
	t.Helper()
	gotData, gotState, err := shard.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(gotData, data, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("data %q, want %q", gotData, data)
	}
	if gotState.AppliedLSN != st.AppliedLSN || gotState.Epoch != st.Epoch || !maps.Equal(gotState.Topics, st.Topics) ||
		gotState.LogClusterID != st.LogClusterID || gotState.LogIncarnation != st.LogIncarnation {
		t.Errorf("State %+v, want %+v", gotState, st)
	}
}

// TestOpensFormat1File: a file written by the older code reads back with
// its data and State, a shard serves it (fencing by its epoch and log
// identity, offsets from its topics) and goes on applying into it.
func TestOpensFormat1File(t *testing.T) {
	dir := copyFixture(t, format1Fixture)
	wantDirHolds(t, dir, format1Data, format1State)

	r := start(t, shard.Config{Dir: dir, ID: "shard-0", Topics: []string{"orders", "inventory"}})
	h := fixtureHello(2, 1, format1State)
	if _, _, err := targettest.Open(ctxT(t), r.cc, h); target.Detail(err).GetCode() != logstorepb.ErrorCode_STALE_EPOCH {
		t.Fatalf("Hello at epoch 2: %v, want STALE_EPOCH", err)
	}
	h = fixtureHello(3, 2, format1State)
	h.LogIncarnation = "0000000000000008"
	if _, _, err := targettest.Open(ctxT(t), r.cc, h); target.Detail(err).GetCode() != logstorepb.ErrorCode_OTHER_LOG {
		t.Fatalf("Hello of another incarnation: %v, want OTHER_LOG", err)
	}
	s, ack, err := targettest.Open(ctxT(t), r.cc, fixtureHello(3, 3, format1State))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ack.AppliedLsn != 43 || len(ack.Topics) != 2 {
		t.Fatalf("HelloAck %v, want applied LSN 43 and 2 topics", ack)
	}
	d := &targetpb.Delivery{Lsn: 44, Slices: []*logstorepb.TxnSlice{{Topic: "orders", FirstOffset: 4,
		Messages: []*logstorepb.Message{{Value: shard.EncodePut([]byte("k4"), []byte("v4"))}}}}}
	if err := s.Send(d); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 44); err != nil {
		t.Fatal(err)
	}
	r.stop()

	next := format1State.Clone()
	next.AppliedLSN, next.Topics["orders"] = 44, 5
	data := maps.Clone(format1Data)
	data["k4"] = []byte("v4")
	wantDirHolds(t, dir, data, next)
}

// fixtureHello is shard-0's Hello at epoch and session from the log st
// was written from.
func fixtureHello(epoch types.Epoch, session types.Session, st target.State) *targetpb.Hello {
	h := targettest.Hello("shard-0", epoch, session)
	h.LogClusterId, h.LogIncarnation = st.LogClusterID, st.LogIncarnation
	return h
}
