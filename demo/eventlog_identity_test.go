package demo

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// serveEventLog serves a target.Server over the event log at path, as
// `logplayer events` does, until t's cleanup (which then closes the file),
// and returns a connection to it.
func serveEventLog(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	l := openEventLog(t, path)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	_, addr := targettest.Serve(t, target.Config{TargetID: "events", Store: l})
	return targettest.Dial(t, addr)
}

// TestEventLogKeepsLogIdentity (issue #31 item 6): the log identity is
// stored with the events target's State and read back after a reopen (and
// by ReadEventLog), so after a restart a Hello from another incarnation is
// refused with OTHER_LOG, as the shard does (shard_test.go
// TestRestartKeepsLogIdentity).
func TestEventLogKeepsLogIdentity(t *testing.T) {
	t.Run("store", testEventLogStoresLogIdentity)
	t.Run("server", testEventLogServerKeepsLogIdentity)
}

func testEventLogStoresLogIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventLogFileName)
	l := openEventLog(t, path)
	gen := targettest.NewLog()
	d1 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o1")}})
	adopted := target.State{Topics: map[string]types.Offset{}, Epoch: 1, LogClusterID: "c1", LogIncarnation: "i1"}
	if err := l.Apply(nil, adopted); err != nil {
		t.Fatal(err)
	}
	st := nextState(adopted, d1)
	if err := l.Apply([]*targetpb.Delivery{d1}, st); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wantState(t, "after reopen", reopenedState(t, path), st)
	_, rst, err := ReadEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "ReadEventLog", rst, st)
}

// testEventLogServerKeepsLogIdentity: through a real target.Server,
// restarted on the same file.
func testEventLogServerKeepsLogIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventLogFileName)
	h := targettest.Hello("events", 1, 1)
	h.LogClusterId, h.LogIncarnation = "c1", "i1"
	t.Run("adopt", func(t *testing.T) {
		snd, _, err := targettest.Open(targettest.Context(t), serveEventLog(t, path), h)
		if err != nil {
			t.Fatal(err)
		}
		snd.Close()
	})
	cc := serveEventLog(t, path) // the restart
	h.Session, h.LogIncarnation = 2, "i2"
	if _, _, err := targettest.Open(targettest.Context(t), cc, h); target.Detail(err).GetCode() != logstorepb.ErrorCode_OTHER_LOG {
		t.Fatalf("Hello of another incarnation after restart: %v, want OTHER_LOG", err)
	}
	h.LogIncarnation = "i1"
	_, ack, err := targettest.Open(targettest.Context(t), cc, h)
	if err != nil || ack.LogClusterId != "c1" || ack.LogIncarnation != "i1" {
		t.Fatalf("Hello of the stored identity after restart: %v (ack %v)", err, ack)
	}
}

// TestEventLogRefusesDamagedLogIdentity: a stored identity longer than any
// log's is a damaged file, refused at open.
func TestEventLogRefusesDamagedLogIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), EventLogFileName)
	if err := openEventLog(t, path).Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(elBucketMeta).Put(elKeyLogInc, bytes.Repeat([]byte("x"), maxLogIdentityBytes+1))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if l, err := OpenEventLog(path); !errors.Is(err, ErrNotEventLog) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("OpenEventLog with a %d-byte incarnation: %v, want ErrNotEventLog", maxLogIdentityBytes+1, err)
	}
}

// reopenedState opens the event log at path, reads its State and closes it.
func reopenedState(t *testing.T, path string) target.State {
	t.Helper()
	l := openEventLog(t, path)
	defer l.Close()
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}
