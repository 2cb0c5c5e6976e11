package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// TestProducersSurviveLeaderSIGKILL: several Producers stream idempotent
// Appends into 3 node processes while the leader process is SIGKILLed and
// restarted (once; -long: 6 times). Every Append succeeds within its
// deadline; afterwards every node holds the same log, it holds exactly the
// acknowledged transactions, and each producer's transactions appear
// exactly once, in sequence order, at the LSNs their results named.
func TestProducersSurviveLeaderSIGKILL(t *testing.T) {
	for _, backend := range logstoretest.RaftLogStores {
		t.Run(string(backend), func(t *testing.T) { testProducersSurviveLeaderSIGKILL(t, backend) })
	}
}

func testProducersSurviveLeaderSIGKILL(t *testing.T, backend logstore.RaftLogStore) {
	const producers = 4
	rounds := 1
	if *long {
		rounds = 6
	}
	procs := logstoretest.NewProcCluster(t, 3, backend)
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.Spec.APIAddr)
	}
	cl := newClient(t, addrs...)

	var (
		mu      sync.Mutex
		results = make([][]*client.Result, producers) // per producer, by sequence-1
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	acked := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range results {
			n += len(r)
		}
		return n
	}
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := cl.NewProducer(client.ProducerConfig{ID: fmt.Sprintf("prod-%d", i)})
			if err != nil {
				t.Error(err)
				return
			}
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				v := []byte(fmt.Sprintf("p%d-%d", i, k))
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				res, err := p.Append(ctx, client.NewTxn().Add(fmt.Sprintf("t%d", i%2), v).Add("all", v))
				cancel()
				if err != nil {
					t.Errorf("producer %d append %d: %v", i, k, err)
					return
				}
				mu.Lock()
				results[i] = append(results[i], res)
				mu.Unlock()
			}
		}()
	}
	progress := func(n int, what string) {
		t.Helper()
		from := acked()
		testwait.For(t, 90*time.Second, what, func() bool { return acked() >= from+n })
	}
	progress(60, "appends before the crash")
	for round := range rounds {
		st, err := cl.LeaderStatus(ctxT(t, 60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		li := -1
		for i, p := range procs {
			if p.Spec.ID == st.NodeId {
				li = i
			}
		}
		if li < 0 {
			t.Fatalf("unknown leader %q", st.NodeId)
		}
		procs[li].Kill()
		progress(60, fmt.Sprintf("round %d: appends after SIGKILL of leader %s", round, st.NodeId))
		procs[li].Start(t)
		progress(30, fmt.Sprintf("round %d: appends after %s restarted", round, st.NodeId))
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	var top uint64
	total, dups := 0, 0
	for _, rs := range results {
		total += len(rs)
		for _, r := range rs {
			top = max(top, r.LSN)
			if r.Duplicate {
				dups++
			}
		}
	}
	if top != uint64(total) {
		t.Fatalf("highest acknowledged lsn %d for %d acknowledged transactions", top, total)
	}
	var logs [][]*client.Transaction
	for _, a := range addrs {
		ncl := newClient(t, a)
		testwait.For(t, 60*time.Second, "node "+a+" catches up", func() bool {
			s, err := ncl.Status(ctxT(t, 5*time.Second), a)
			return err == nil && s.HeadLsn >= top
		})
		s, err := ncl.Status(ctxT(t, 5*time.Second), a)
		if err != nil || s.HeadLsn != top {
			t.Fatalf("node %s head %d, want %d: unacknowledged transactions in the log (%v)", a, s.GetHeadLsn(), top, err)
		}
		logs = append(logs, readLog(t, ncl, top))
	}
	for i := 1; i < len(logs); i++ {
		for j := range logs[0] {
			if !proto.Equal(logs[0][j], logs[i][j]) {
				t.Fatalf("lsn %d differs between %s and %s", j+1, addrs[0], addrs[i])
			}
		}
	}
	at := valuesIn(logs[0], "all")
	for i, rs := range results {
		for k, r := range rs {
			v := fmt.Sprintf("p%d-%d", i, k)
			if lsns := at[v]; len(lsns) != 1 || lsns[0] != r.LSN || r.Sequence != uint64(k+1) {
				t.Fatalf("producer %d sequence %d (%s): at lsns %v, result lsn %d", i, r.Sequence, v, lsns, r.LSN)
			}
			if k > 0 && r.LSN <= rs[k-1].LSN {
				t.Fatalf("producer %d: sequence %d at lsn %d not after %d", i, k+1, r.LSN, rs[k-1].LSN)
			}
		}
	}
	t.Logf("%d rounds, %d transactions from %d producers, %d answered as duplicates of a first commit", rounds, total, producers, dups)
}
