package logstore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func TestMain(m *testing.M) {
	logstoretest.MaybeRunNode()
	os.Exit(m.Run())
}

// TestCrashLeaderProcess: 3 node processes under load, SIGKILL the leader,
// restart it; every acknowledged Append is there exactly once, all nodes
// hold the same transactions in the same LSN order, offsets are dense, and
// idempotent producers' sequences appear exactly once, in order.
func TestCrashLeaderProcess(t *testing.T) {
	for _, backend := range logstoretest.RaftLogStores {
		t.Run(string(backend), func(t *testing.T) { testCrashLeaderProcess(t, backend) })
	}
}

func testCrashLeaderProcess(t *testing.T, backend logstore.RaftLogStore) {
	procs := logstoretest.NewProcCluster(t, 3, backend)
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.Spec.APIAddr)
	}
	cl := newClient(t, addrs...)
	leaderIndex := func() int { return procLeader(t, cl, procs) }

	var (
		mu      sync.Mutex
		acked   = map[string]*logstorepb.AppendResponse{}
		stop    = make(chan struct{})
		total   sync.WaitGroup
		unknown int
	)
	worker := func(w int, producer bool) {
		defer total.Done()
		var pid string
		var epoch uint64
		if producer {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			var err error
			pid, epoch, err = cl.InitProducer(ctx, fmt.Sprintf("p%d", w))
			cancel()
			if err != nil {
				t.Errorf("register producer p%d: %v", w, err)
				return
			}
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("w%d-%d", w, i)
			req := txnReq(id, fmt.Sprintf("t%d", w%3), "all")
			if producer {
				req.ProducerId, req.ProducerEpoch, req.Sequence = pid, epoch, uint64(i+1)
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
	testwait.For(t, 60*time.Second, "load before the crash", func() bool { return count() >= 150 })
	li := leaderIndex()
	procs[li].Kill()
	before := count()
	testwait.For(t, 60*time.Second, "load after the crash", func() bool { return count() >= before+150 })
	procs[li].Start(t)
	after := count()
	testwait.For(t, 60*time.Second, "load after the restart", func() bool { return count() >= after+100 })
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
	testwait.For(t, 60*time.Second, "node "+addr+" catches up", func() bool {
		st, err := cl.Status(ctxT(t, 5*time.Second), addr)
		if err == nil {
			head = st.HeadLsn
		}
		return head >= lsn
	})
	return head
}
