package demo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// TestEventLogDir: OpenEventLogDir creates the directory and reads the
// State back; ResetEventLogDir refuses a directory without an event log
// (naming a shard's) and resets the one it finds, whose result prints
// the states before and after.
func TestEventLogDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "events")
	l, st, err := OpenEventLogDir(dir)
	if err != nil || st.AppliedLSN != 0 {
		t.Fatalf("OpenEventLogDir of a new directory: state %+v, %v", st, err)
	}
	gen := targettest.NewLog()
	d1 := gen.Txn(targettest.Part{Topic: OrdersTopic, Values: [][]byte{[]byte("o1")}})
	next := nextState(target.State{Topics: map[string]types.Offset{}, Epoch: 3, LogClusterID: "c1", LogIncarnation: "i1"}, d1)
	if err := l.Apply([]*targetpb.Delivery{d1}, next); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, st, err = OpenEventLogDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "reopened", st, next)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if EventLogPath(dir) != filepath.Join(dir, EventLogFileName) {
		t.Fatalf("EventLogPath %s", EventLogPath(dir))
	}

	res, err := ResetEventLogDir(dir, EventLogReset{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	want := "now:   applied lsn 1, epoch 3, log c1/i1, topics map[orders:1]\n" +
		"reset: applied lsn 1, epoch 3, log none (the next Hello's is adopted), topics map[orders:1]\n" +
		"events above lsn 1: 0 deleted\n"
	if out.String() != want {
		t.Fatalf("result:\n%s\nwant:\n%s", out.String(), want)
	}

	empty := t.TempDir()
	if _, err := ResetEventLogDir(empty, EventLogReset{}); err == nil || !errors.Is(err, os.ErrNotExist) ||
		!strings.HasPrefix(err.Error(), "no events target in "+empty+": ") {
		t.Fatalf("reset of an empty directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(empty, shard.FileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ResetEventLogDir(empty, EventLogReset{}); err == nil || !strings.Contains(err.Error(), "holds a shard ("+shard.FileName+")") {
		t.Fatalf("reset of a shard's directory: %v", err)
	}
}

// TestWriteChecked: a report that is not OK is printed and then
// ErrCheckFailed; an OK one is printed alone.
func TestWriteChecked(t *testing.T) {
	for _, ok := range []bool{true, false} {
		var out bytes.Buffer
		err := (&Report{OK: ok}).WriteChecked(&out)
		if (err == nil) != ok || (!ok && err != ErrCheckFailed) {
			t.Errorf("OK %v: %v", ok, err)
		}
		if !strings.HasSuffix(out.String(), `"ok":`+map[bool]string{true: "true", false: "false"}[ok]+"}\n") {
			t.Errorf("OK %v: printed\n%s", ok, out.String())
		}
	}
}

func TestCheckShardAddrs(t *testing.T) {
	for _, tc := range []struct {
		shards map[string]string
		want   string
	}{
		{map[string]string{"shard-0": "a"}, "give at least 2 shards"},
		{map[string]string{"shard-0": "a", "shard-2": "b"}, "shards must be named shard-0 .. shard-1: shard-1 is missing"},
		{map[string]string{"shard-0": "a", "shard-1": "b"}, ""},
	} {
		err := CheckShardAddrs(tc.shards)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.shards, err, tc.want)
		}
	}
}
