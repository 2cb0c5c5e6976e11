package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

func TestEventsUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "--addr", "127.0.0.1:1", "--data-dir", dir}, "missing required flag --id"},
		{[]string{"events", "--id", "events", "--data-dir", dir}, "missing required flag --addr"},
		{[]string{"events", "--id", "events", "--addr", "127.0.0.1:1"}, "missing required flag --data-dir"},
		{[]string{"events", "--id", "events", "--addr", "nohostport", "--data-dir", dir}, "want host:port"},
		{[]string{"events", "--id", "events", "--addr", "127.0.0.1:1", "--data-dir", dir, "--topics", "orders,orders"}, `repeated topic "orders"`},
		{[]string{"events", "--id", "events", "--addr", "127.0.0.1:1", "--data-dir", dir, "--metrics-tls"}, "need --tls-cert"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, nil, tc.args...)
			wantUsage(t, code, errOut, tc.want)
		})
	}
}

// TestEventsRefusesForeignFile: a data directory whose events.db is not
// an event log is a runtime error naming it, and the file is left alone.
func TestEventsRefusesForeignFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, demo.EventLogFileName)
	junk := bytes.Repeat([]byte("not an event log "), 1000)
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, nil, "events", "--id", "events", "--addr", closedAddr(t), "--data-dir", dir)
	wantRuntimeError(t, code, errOut, "not an event log")
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, junk) {
		t.Fatalf("the refused file changed (%v)", err)
	}
}

// eventsProc is one in-process run of `logplayer events`.
type eventsProc struct {
	cancel context.CancelFunc
	done   chan int // the exit code, once
	stderr *bytes.Buffer
}

func startEvents(t *testing.T, args ...string) *eventsProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &eventsProc{cancel: cancel, done: make(chan int, 1), stderr: &bytes.Buffer{}}
	s := &cli.Sys{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: p.stderr}
	go func() { p.done <- app.Run(ctx, append([]string{"events"}, args...), s) }()
	t.Cleanup(cancel)
	return p
}

// stop is SIGTERM: it waits for a clean exit.
func (p *eventsProc) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case code := <-p.done:
		if code != cli.ExitOK {
			t.Fatalf("events exited %d:\n%s", code, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("events did not stop within 30 s")
	}
}

// openEvents opens a Deliver stream to the events target at addr with
// epoch, waiting for it to serve.
func openEvents(t *testing.T, p *eventsProc, addr string, epoch types.Epoch) (*targettest.Sender, *targetpb.HelloAck) {
	t.Helper()
	return openEventsHello(t, p, addr, targettest.Hello("events", epoch, 1))
}

// openEventsHello is openEvents with the Hello h.
func openEventsHello(t *testing.T, p *eventsProc, addr string, h *targetpb.Hello) (*targettest.Sender, *targetpb.HelloAck) {
	t.Helper()
	cc := targettest.Dial(t, addr)
	var snd *targettest.Sender
	var ack *targetpb.HelloAck
	testwait.ForErr(t, testwait.Max, "the events target to answer a Hello", func() error {
		select {
		case code := <-p.done:
			t.Fatalf("events exited %d:\n%s", code, p.stderr)
		default:
		}
		var err error
		snd, ack, err = targettest.Open(context.Background(), cc, h)
		return err
	})
	t.Cleanup(snd.Close)
	return snd, ack
}

// deliverEvents sends ds on snd and waits for the ack of the last.
func deliverEvents(t *testing.T, snd *targettest.Sender, ds ...*targetpb.Delivery) {
	t.Helper()
	if err := snd.Send(ds...); err != nil {
		t.Fatal(err)
	}
	lsn := types.LSN(ds[len(ds)-1].Lsn)
	if err := snd.WaitAck(targettest.Context(t), lsn); err != nil {
		t.Fatalf("ack of lsn %d: %v", lsn, err)
	}
}

// TestEventsServes runs `logplayer events`, delivers to it as a LogPlayer
// does, reads its /metrics, stops it, and finds every delivered message in
// its file, with the State; a restart on the same directory resumes at
// that State.
func TestEventsServes(t *testing.T) {
	dir := t.TempDir()
	addr, metrics := closedAddr(t), closedAddr(t)
	p := startEvents(t, "--id", "events", "--addr", addr, "--data-dir", dir, "--metrics-addr", metrics)
	snd, ack := openEvents(t, p, addr, 4)
	if ack.AppliedLsn != 0 {
		t.Fatalf("new target: HelloAck %v", ack)
	}

	gen := targettest.NewLog()
	d1 := gen.Txn(targettest.Part{Topic: demo.OrdersTopic, Values: [][]byte{[]byte(`{"txn":"t1"}`)}},
		targettest.Part{Topic: demo.InventoryTopic, Values: [][]byte{[]byte(`{"txn":"t1"}`)}})
	d1.Slices[0].Messages[0].Key = []byte("t1")
	d1.Slices[0].Messages[0].Headers = []*logstorepb.Header{{Key: "h", Value: []byte("v")}}
	d2 := gen.Progress()
	d3 := gen.Txn(targettest.Part{Topic: demo.OrdersTopic, Values: [][]byte{[]byte(`{"txn":"t2"}`)}})
	deliverEvents(t, snd, d1, d2, d3)
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `target_applied_lsn{target="events"} 3`; !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, body)
	}
	snd.Close()
	p.stop(t)

	events, st, err := demo.ReadEventLog(filepath.Join(dir, demo.EventLogFileName))
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedLSN != 3 || st.Epoch != 4 || st.Topics[demo.OrdersTopic] != 2 || st.Topics[demo.InventoryTopic] != 1 {
		t.Fatalf("durable state %+v", st)
	}
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%d %s@%d %s", e.LSN, e.Topic, e.Offset, e.Message.Value))
	}
	want := []string{`1 orders@0 {"txn":"t1"}`, `1 inventory@0 {"txn":"t1"}`, `3 orders@1 {"txn":"t2"}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !proto.Equal(events[0].Message, d1.Slices[0].Messages[0]) {
		t.Fatalf("event 0 is %v, delivered %v", events[0].Message, d1.Slices[0].Messages[0])
	}

	// A restart resumes where the file is.
	p = startEvents(t, "--id", "events", "--addr", addr, "--data-dir", dir)
	_, ack = openEvents(t, p, addr, 5)
	offsets := map[string]uint64{}
	for _, to := range ack.Topics {
		offsets[to.Topic] = to.NextOffset
	}
	if ack.AppliedLsn != 3 || offsets[demo.OrdersTopic] != 2 || offsets[demo.InventoryTopic] != 1 {
		t.Fatalf("after the restart: HelloAck %v", ack)
	}
	p.stop(t)
}
