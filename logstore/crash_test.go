package logstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// testNodeEnv makes the test binary run one LogStore node (config as JSON)
// instead of the tests, so crash tests can SIGKILL real processes.
const testNodeEnv = "LOGSTORE_TESTNODE"

type nodeSpec struct {
	ID, Dir, RaftAddr, APIAddr string
	Peers                      []logstore.Peer
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(testNodeEnv); spec != "" {
		os.Exit(runTestNode(spec))
	}
	os.Exit(m.Run())
}

func runTestNode(spec string) int {
	var s nodeSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(s.Dir), s.ID+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := testConfig(s.ID, s.Dir)
	cfg.Logger = slog.New(slog.NewTextHandler(logf, nil))
	cfg.RaftAddr, cfg.APIAddr, cfg.Bootstrap = s.RaftAddr, s.APIAddr, s.Peers
	cfg.SegmentBytes = 32 << 10
	cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 200*time.Millisecond
	n, err := logstore.NewNode(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	n.Close()
	return 0
}

type procNode struct {
	spec nodeSpec
	cmd  *exec.Cmd
}

func freeAddr(t testing.TB) string {
	l := listen(t)
	defer l.Close()
	return l.Addr().String()
}

func (p *procNode) start(t testing.TB) {
	t.Helper()
	b, _ := json.Marshal(p.spec)
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), testNodeEnv+"="+string(b))
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (p *procNode) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		p.cmd = nil
	}
}

// TestCrashLeaderProcess: 3 node processes under load, SIGKILL the leader,
// restart it; every acknowledged Append is there exactly once, all nodes
// hold the same transactions in the same LSN order, offsets are dense, and
// idempotent producers' sequences appear exactly once, in order.
func TestCrashLeaderProcess(t *testing.T) {
	base := t.TempDir()
	var peers []logstore.Peer
	for i := range 3 {
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: freeAddr(t), APIAddr: freeAddr(t)})
	}
	procs := make([]*procNode, 3)
	var addrs []string
	for i, p := range peers {
		procs[i] = &procNode{spec: nodeSpec{ID: p.ID, Dir: filepath.Join(base, p.ID), RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, Peers: peers}}
		procs[i].start(t)
		addrs = append(addrs, p.APIAddr)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill()
		}
	})
	cl := newClient(t, addrs...)
	leaderIndex := func() int {
		st, err := cl.LeaderStatus(ctxT(t, 60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range peers {
			if p.ID == st.NodeId {
				return i
			}
		}
		t.Fatalf("unknown leader %q", st.NodeId)
		return -1
	}

	var (
		mu      sync.Mutex
		acked   = map[string]*logstorepb.AppendResponse{}
		stop    = make(chan struct{})
		total   sync.WaitGroup
		unknown int
	)
	worker := func(w int, producer bool) {
		defer total.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("w%d-%d", w, i)
			req := txnReq(id, fmt.Sprintf("t%d", w%3), "all")
			if producer {
				req.ProducerId, req.Sequence = fmt.Sprintf("p%d", w), uint64(i+1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			resp, err := cl.Append(ctx, req)
			cancel()
			if err != nil {
				if producer {
					t.Errorf("producer append %s: %v", id, err) // retried within 60s: must succeed
					return
				}
				mu.Lock()
				unknown++ // outcome unknown: may or may not be there (at most once)
				mu.Unlock()
				continue
			}
			mu.Lock()
			acked[id] = resp
			mu.Unlock()
		}
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for w := range 6 {
		total.Add(1)
		go worker(w, w%2 == 0)
	}
	waitFor(t, 60*time.Second, "load before the crash", func() bool { return count() >= 150 })
	li := leaderIndex()
	procs[li].kill()
	before := count()
	waitFor(t, 60*time.Second, "load after the crash", func() bool { return count() >= before+150 })
	procs[li].start(t)
	after := count()
	waitFor(t, 60*time.Second, "load after the restart", func() bool { return count() >= after+100 })
	close(stop)
	total.Wait()

	var top uint64
	for _, r := range acked {
		top = max(top, r.Lsn)
	}
	final := top // unknown-outcome txns may land above the last ack
	for _, a := range addrs {
		final = max(final, waitHead(t, a, top))
	}
	var logs [][]*logstorepb.Transaction
	for _, a := range addrs {
		waitHead(t, a, final)
		logs = append(logs, readAll(t, a, final))
	}
	for i := 1; i < len(logs); i++ {
		sameTxns(t, logs[0], logs[i])
	}
	seen := map[string]uint64{}
	lastSeq := map[string]int{}
	var acks []ack
	for _, txn := range logs[0] {
		id := string(txn.Slices[0].Messages[0].Value)
		if prev, ok := seen[id]; ok {
			t.Fatalf("txn %s at lsn %d and %d", id, prev, txn.Lsn)
		}
		seen[id] = txn.Lsn
		var w, i int
		fmt.Sscanf(id, "w%d-%d", &w, &i)
		if w%2 == 0 { // producer: sequences in order, none skipped
			p := fmt.Sprintf("p%d", w)
			if want := lastSeq[p]; i != want {
				t.Fatalf("producer %s: txn %d at lsn %d, want %d next", p, i, txn.Lsn, want)
			}
			lastSeq[p] = i + 1
		}
	}
	for id, r := range acked {
		var w, i int
		fmt.Sscanf(id, "w%d-%d", &w, &i)
		acks = append(acks, ack{id: id, req: txnReq(id, fmt.Sprintf("t%d", w%3), "all"), resp: r})
	}
	checkLog(t, logs[0], acks)
	t.Logf("%d acked, %d unknown outcomes, %d txns in the log", len(acked), unknown, len(logs[0]))
}

// waitHead waits until the node at addr has applied at least lsn and
// returns its head.
func waitHead(t testing.TB, addr string, lsn uint64) uint64 {
	t.Helper()
	cl := newClient(t, addr)
	var head uint64
	waitFor(t, 60*time.Second, "node "+addr+" catches up", func() bool {
		st, err := cl.Status(ctxT(t, 5*time.Second), addr)
		if err == nil {
			head = st.HeadLsn
		}
		return head >= lsn
	})
	return head
}
