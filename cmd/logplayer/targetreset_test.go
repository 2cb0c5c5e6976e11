package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
)

func TestTargetResetUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"target", "reset"}, nil, "missing required flag --data-dir"},
		{[]string{"target", "reset", "--data-dir", "d", "--lsn", "-1"}, nil, "want a number"},
		{[]string{"target", "reset", "--data-dir", "d", "--epoch", "x"}, nil, "want a number"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.env, tc.args...)
			wantUsage(t, code, errOut, tc.want)
		})
	}
}

// TestTargetReset runs `logplayer events` on a real directory, delivers to
// it from log c1/i1, and shows the runbook: after a restore (incarnation
// i2) the restarted target refuses the new log (OTHER_LOG); `logplayer
// target reset` refuses while it runs, prints and changes nothing without
// --confirm, refuses a position above the applied one, and with --confirm
// moves the target back to the restored log's last LSN; the target then
// takes the new log's Hello and continues from there.
func TestTargetReset(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, demo.EventLogFileName)
	addr := closedAddr(t)
	p := startEvents(t, "--id", "events", "--addr", addr, "--data-dir", dir)
	h := targettest.Hello("events", 4, 1)
	h.LogClusterId, h.LogIncarnation = "c1", "i1"
	snd, _ := openEventsHello(t, p, addr, h)
	gen := targettest.NewLog()
	d1 := gen.Txn(targettest.Part{Topic: demo.OrdersTopic, Values: [][]byte{[]byte(`{"txn":"t1"}`)}})
	d2 := gen.Txn(targettest.Part{Topic: demo.InventoryTopic, Values: [][]byte{[]byte(`{"txn":"t1"}`)}})
	d3 := gen.Txn(targettest.Part{Topic: demo.OrdersTopic, Values: [][]byte{[]byte(`{"txn":"t2"}`)}})
	deliverEvents(t, snd, d1, d2, d3)
	ctx := targettest.Context(t)
	snd.Close()
	p.stop(t)

	// The LogStore was restored from a backup of LSNs 1..2: incarnation i2.
	p = startEvents(t, "--id", "events", "--addr", addr, "--data-dir", dir)
	h.Session, h.LogIncarnation = 2, "i2"
	cc := targettest.Dial(t, addr)
	testwait.ForErr(t, testwait.Max, "the restarted target to refuse the restored log", func() error {
		_, _, err := targettest.Open(ctx, cc, h)
		if c := target.Detail(err).GetCode(); c != logstorepb.ErrorCode_OTHER_LOG {
			return fmt.Errorf("Hello of the restored log: %v, want OTHER_LOG", err)
		}
		return nil
	})
	code, _, errOut := runCLI(t, nil, "target", "reset", "--data-dir", dir, "--lsn", "2", "--confirm")
	wantRuntimeError(t, code, errOut, "stop the target first")
	p.stop(t)

	state := func() string {
		t.Helper()
		events, st, err := demo.ReadEventLog(path)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d events, lsn %d epoch %d log %s/%s topics %v", len(events), st.AppliedLSN, st.Epoch, st.LogClusterID, st.LogIncarnation, st.Topics)
	}
	before := state()
	if want := "3 events, lsn 3 epoch 4 log c1/i1 topics map[inventory:1 orders:2]"; before != want {
		t.Fatalf("before the reset: %s, want %s", before, want)
	}
	// LOGPLAYER_CONFIRM is not --confirm: nothing is written.
	code, out, errOut := runCLI(t, map[string]string{"LOGPLAYER_CONFIRM": "true"}, "target", "reset", "--data-dir", dir, "--lsn", "2")
	wantRuntimeError(t, code, errOut, "add --confirm")
	for _, want := range []string{"now:   applied lsn 3, epoch 4, log c1/i1", "reset: applied lsn 2, epoch 4, log none", "events above lsn 2: 1 deleted"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run's output lacks %q:\n%s", want, out)
		}
	}
	code, _, errOut = runCLI(t, nil, "target", "reset", "--data-dir", dir, "--lsn", "4", "--confirm")
	wantRuntimeError(t, code, errOut, "above the applied lsn 3")
	if got := state(); got != before {
		t.Fatalf("a refused reset changed the target: %s", got)
	}

	if code, out, errOut = runCLI(t, nil, "target", "reset", "--data-dir", dir, "--lsn", "2", "--confirm"); code != cli.ExitOK {
		t.Fatalf("reset: exit %d, %s%s", code, out, errOut)
	}
	if got, want := state(), "2 events, lsn 2 epoch 4 log / topics map[inventory:1 orders:1]"; got != want {
		t.Fatalf("after the reset: %s, want %s", got, want)
	}

	p = startEvents(t, "--id", "events", "--addr", addr, "--data-dir", dir)
	h.Epoch, h.Session = 5, 1
	snd, ack := openEventsHello(t, p, addr, h)
	if ack.AppliedLsn != 2 || ack.LogIncarnation != "i2" {
		t.Fatalf("HelloAck after the reset: %v", ack)
	}
	next := targettest.NewLog()
	next.SkipLSNs(2)
	d3b := next.Txn(targettest.Part{Topic: demo.OrdersTopic, Values: [][]byte{[]byte(`{"txn":"t3"}`)}})
	d3b.Slices[0].FirstOffset = 1
	deliverEvents(t, snd, d3b)
	snd.Close()
	p.stop(t)
	if got, want := state(), "3 events, lsn 3 epoch 5 log c1/i2 topics map[inventory:1 orders:2]"; got != want {
		t.Fatalf("after the delivery: %s, want %s", got, want)
	}
}

// TestTargetResetRefusesShard: a shard's directory is not rewritten; the
// error names the shard's own reset.
func TestTargetResetRefusesShard(t *testing.T) {
	dir := t.TempDir()
	sh, err := shard.Open(shard.Config{Dir: dir, ID: "shard-0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, nil, "target", "reset", "--data-dir", dir, "--confirm")
	wantRuntimeError(t, code, errOut, "--adopt-log-identity")
	code, _, errOut = runCLI(t, nil, "target", "reset", "--data-dir", t.TempDir(), "--confirm")
	wantRuntimeError(t, code, errOut, "no events target in")
}
