package shard_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

var (
	long = flag.Bool("long", false, "run the long crash suites (many more kills and snapshots)")
	seed = flag.Uint64("seed", 0, "seed of the crash suites (0: from the clock; printed on failure)")
)

// Child process mode: the crash tests re-execute the test binary with these
// variables set, and it runs one shard until it is killed.
const (
	envChildDir = "SHARD_CRASH_CHILD_DIR"
	envChildID  = "SHARD_CRASH_CHILD_ID"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envChildDir); dir != "" {
		os.Exit(runChild(dir, os.Getenv(envChildID)))
	}
	os.Exit(m.Run())
}

// runChild serves one shard on 127.0.0.1:0, prints "ADDR host:port" on
// stdout, and serves until SIGTERM (or SIGKILL).
func runChild(dir, id string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sh, err := shard.Open(shard.Config{Dir: dir, ID: types.TargetID(id), Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Printf("ADDR %s\n", lis.Addr())
	if err := sh.Serve(ctx, lis); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
	}
	if err := sh.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// child is a shard process.
type child struct {
	cmd    *exec.Cmd
	addr   string
	stderr *bytes.Buffer
}

func startChild(t *testing.T, dir, id string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildID+"="+id)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.kill(t) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		c.kill(t)
		t.Fatalf("child did not start: %v; stderr:\n%s", err, c.stderr)
	}
	c.addr = strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return c
}

// kill sends SIGKILL and reaps the process; a second call does nothing.
func (c *child) kill(t *testing.T) {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
	if t.Failed() && c.stderr.Len() > 0 {
		t.Logf("child stderr:\n%s", c.stderr)
	}
}

// crashLog is a generated log for one shard topic: puts and deletes over a
// small key space (so order matters) with values unique per LSN (so a
// mutation applied twice or out of order shows in the state), progress
// markers and LSN gaps.
type crashLog struct {
	topic string
	ds    []*targetpb.Delivery
}

func genLog(rng *rand.Rand, topic string, n int) *crashLog {
	l := &crashLog{topic: topic}
	gen := targettest.NewLog()
	for range n {
		gen.SkipLSNs(uint64(rng.IntN(3)))
		if rng.IntN(20) == 0 {
			l.ds = append(l.ds, gen.Progress())
			continue
		}
		lsn := gen.LSN() + 1
		var vals [][]byte
		for i := range 1 + rng.IntN(4) {
			key := fmt.Sprintf("k%02d", rng.IntN(64))
			if rng.IntN(5) == 0 {
				vals = append(vals, shard.EncodeDelete([]byte(key)))
			} else {
				vals = append(vals, shard.EncodePut([]byte(key), fmt.Appendf(nil, "%d/%d", lsn, i)))
			}
		}
		l.ds = append(l.ds, gen.Txn(targettest.Part{Topic: topic, Values: vals}))
	}
	return l
}

// modelAt is the expected data and topic next offset after every delivery
// with LSN <= lsn.
func (l *crashLog) modelAt(t *testing.T, lsn types.LSN) (map[string][]byte, types.Offset) {
	model := map[string][]byte{}
	var next types.Offset
	for _, d := range l.ds {
		if types.LSN(d.Lsn) > lsn {
			break
		}
		if err := shard.ModelApply(model, []string{l.topic}, d.Slices); err != nil {
			t.Fatal(err)
		}
		for _, sl := range d.Slices {
			next = types.Offset(sl.FirstOffset) + types.Offset(len(sl.Messages))
		}
	}
	return model, next
}

// after returns the deliveries with LSN > lsn.
func (l *crashLog) after(lsn types.LSN) []*targetpb.Delivery {
	for i, d := range l.ds {
		if types.LSN(d.Lsn) > lsn {
			return l.ds[i:]
		}
	}
	return nil
}

func (l *crashLog) last() types.LSN { return types.LSN(l.ds[len(l.ds)-1].Lsn) }

// checkDisk checks that the shard file in dir holds exactly the model at its
// own applied LSN, and that this LSN covers every ack the sender saw.
func (l *crashLog) checkDisk(t *testing.T, dir string, acked types.LSN) types.LSN {
	t.Helper()
	data, st, err := shard.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedLSN < acked {
		t.Fatalf("durable applied lsn %d below the acked lsn %d: an acked delivery was lost", st.AppliedLSN, acked)
	}
	model, next := l.modelAt(t, st.AppliedLSN)
	if !maps.EqualFunc(data, model, bytes.Equal) {
		t.Fatalf("at applied lsn %d the data differs from the model:\n got %q\nwant %q", st.AppliedLSN, data, model)
	}
	if st.Topics[l.topic] != next {
		t.Fatalf("at applied lsn %d topic offset %d, model %d", st.AppliedLSN, st.Topics[l.topic], next)
	}
	return st.AppliedLSN
}

func suiteSeed(t *testing.T) *rand.Rand {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with -seed=%d", s)
		}
	})
	return rand.New(rand.NewPCG(s, s>>1|1))
}

// sendBatches sends ds in batches of 1..maxBatch deliveries; it stops at the
// first send error (the process died) and returns how many it sent.
func sendBatches(rng *rand.Rand, s *targettest.Sender, ds []*targetpb.Delivery, maxBatch int) int {
	sent := 0
	for sent < len(ds) {
		n := min(1+rng.IntN(maxBatch), len(ds)-sent)
		if s.Send(ds[sent:sent+n]...) != nil {
			return sent
		}
		sent += n
	}
	return sent
}

// TestKillNine kills a real shard process with SIGKILL at random moments
// while batches arrive. After each kill the file on disk must hold exactly
// the model at its applied LSN, covering every ack; after each restart the
// HelloAck reports that LSN, and redelivering from it + 1 ends in exactly
// the state of the whole log.
func TestKillNine(t *testing.T) {
	rng := suiteSeed(t)
	kills, txns := 6, 3000
	if *long {
		kills, txns = 60, 30000
	}
	const id = "shard-1"
	l := genLog(rng, id, txns)
	dir := t.TempDir()
	var durable types.LSN
	var killsDone uint64
	for {
		c := startChild(t, dir, id)
		cc := targettest.Dial(t, c.addr)
		s, ack, err := targettest.Open(targettest.Context(t), cc, targettest.Hello(id, 1, 1))
		if err != nil {
			t.Fatal(err)
		}
		if types.LSN(ack.AppliedLsn) != durable {
			t.Fatalf("restart %d: HelloAck lsn %d, the file said %d", killsDone, ack.AppliedLsn, durable)
		}
		rest := l.after(types.LSN(ack.AppliedLsn))
		if killsDone == uint64(kills) || len(rest) == 0 {
			// Last round: deliver everything; the final state is the whole log's.
			if n := sendBatches(rng, s, rest, 64); n != len(rest) {
				t.Fatalf("final round sent %d of %d", n, len(rest))
			}
			if err := s.WaitAck(targettest.Context(t), l.last()); err != nil {
				t.Fatal(err)
			}
			c.kill(t)
			if got := l.checkDisk(t, dir, s.Acked()); got != l.last() {
				t.Fatalf("final applied lsn %d, want %d", got, l.last())
			}
			s.Close()
			return
		}
		// Stream everything that remains; kill once the acks passed a random
		// LSN, while batches are still arriving and being applied.
		sendRng := rand.New(rand.NewPCG(rng.Uint64(), 2)) // the sender goroutine's own
		sendDone := make(chan struct{})
		go func() {
			defer close(sendDone)
			sendBatches(sendRng, s, rest, 64)
		}()
		span := max(1, len(rest)/(kills-int(killsDone)))
		if err := s.WaitAck(targettest.Context(t), types.LSN(rest[rng.IntN(span)].Lsn)); err != nil {
			t.Fatal(err)
		}
		acked := s.Acked()
		c.kill(t)
		s.Close()
		<-sendDone
		durable = l.checkDisk(t, dir, acked)
		killsDone++
		t.Logf("kill %d: acked %d, durable %d of %d", killsDone, acked, durable, l.last())
	}
}

// TestPowerLossSnapshots freezes a shard process (SIGSTOP) at random moments,
// copies its file and resumes it. The copy is what a power loss at that
// moment would leave if the disk kept writes in the order issued: it may
// stop in the middle of a bbolt commit. Every copy must open at a committed
// state whose data matches the model at its applied LSN, covering every ack
// received before the freeze.
func TestPowerLossSnapshots(t *testing.T) {
	rng := suiteSeed(t)
	snapshots, txns := 25, 4000
	if *long {
		snapshots, txns = 300, 40000
	}
	const id = "shard-3"
	l := genLog(rng, id, txns)
	dir := t.TempDir()
	c := startChild(t, dir, id)
	cc := targettest.Dial(t, c.addr)
	s, _, err := targettest.Open(targettest.Context(t), cc, targettest.Hello(id, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sendDone := make(chan int, 1)                     // deliveries sent
	sendRng := rand.New(rand.NewPCG(rng.Uint64(), 1)) // the sender goroutine's own
	go func() { sendDone <- sendBatches(sendRng, s, l.ds, 16) }()

	var lastCopy types.LSN
	for i := range snapshots {
		// A random point: after the acks passed a random LSN ahead.
		ahead := lastCopy + 1 + types.LSN(rng.IntN(int(l.last()/types.LSN(snapshots))+1))
		if err := s.WaitAck(targettest.Context(t), min(ahead, l.last())); err != nil {
			t.Fatal(err)
		}
		acked := s.Acked()
		snap := filepath.Join(t.TempDir(), fmt.Sprint(i))
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		err := copyFile(filepath.Join(dir, shard.FileName), filepath.Join(snap, shard.FileName))
		if err2 := c.cmd.Process.Signal(syscall.SIGCONT); err2 != nil {
			t.Fatal(err2)
		}
		if err != nil {
			t.Fatal(err)
		}
		lastCopy = l.checkDisk(t, snap, acked)
	}
	if n := <-sendDone; n != len(l.ds) {
		t.Fatalf("sent %d of %d", n, len(l.ds))
	}
	if err := s.WaitAck(targettest.Context(t), l.last()); err != nil {
		t.Fatal(err)
	}
	c.kill(t)
	l.checkDisk(t, dir, l.last())
}

func copyFile(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
