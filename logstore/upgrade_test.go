package logstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestRollingUpgradeUnderLoad upgrades a running 3-node cluster of real
// processes node by node, in the README's order (followers, then a
// leadership transfer, then the old leader), while idempotent producers
// write. The "old" and "new" builds are the same binary advertising the
// base and the current cluster version. Every Append must succeed (the
// client retries across restarts), every acknowledged one is in the log
// once at its LSN on every node, and at the end the cluster version is
// raised and DeleteGroup (refused before) works.
func TestRollingUpgradeUnderLoad(t *testing.T) {
	procs := logstoretest.NewProcClusterWith(t, 3, logstore.RaftLogWAL, func(s *logstoretest.ProcSpec) {
		s.AdvertisedVersion = fsm.BaseVersion
		s.AllowLegacyProducers = true // the writers below are legacy producers, as before the upgrade
	})
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.Spec.APIAddr)
	}
	cl := newClient(t, addrs...)
	ctx := ctxT(t, 120*time.Second)
	leader := func() int { return procLeader(t, cl, procs) }
	if _, err := cl.Append(ctx, &logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g", Topic: "t", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		acked = map[string]*logstorepb.AppendResponse{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				req := txnReq(id, fmt.Sprintf("t%d", w), "all")
				req.ProducerId, req.Sequence = fmt.Sprintf("p%d", w), uint64(i+1)
				actx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				resp, err := cl.Append(actx, req)
				cancel()
				if err != nil {
					t.Errorf("append %s during the upgrade: %v", id, err)
					return
				}
				mu.Lock()
				acked[id] = resp
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	progress := func(what string) {
		before := count()
		testwait.For(t, 60*time.Second, what, func() bool { return count() >= before+50 })
	}
	upgrade := func(i int) {
		procs[i].Stop()
		procs[i].Spec.AdvertisedVersion = 0 // the new build
		procs[i].Start(t)
		progress("load after upgrading " + procs[i].Spec.ID)
	}
	progress("load before the upgrade")
	if _, err := cl.DeleteGroup(ctx, "g"); apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("DeleteGroup on the old cluster: %v, want FEATURE_NOT_ENABLED", err)
	}

	old := leader()
	var upgraded string
	for i := range procs {
		if i != old {
			upgrade(i)
			upgraded = procs[i].Spec.ID
		}
	}
	if err := cl.TransferLeadership(ctx, upgraded); err != nil {
		t.Fatalf("transfer leadership to %s: %v", upgraded, err)
	}
	testwait.For(t, 60*time.Second, "the new leader", func() bool { return leader() != old })
	upgrade(old)

	testwait.For(t, 60*time.Second, "cluster version raised on every node", func() bool {
		for _, a := range addrs {
			st, err := cl.Status(ctx, a)
			if err != nil || st.ClusterVersion != fsm.CurrentVersion || st.SupportedVersion != fsm.CurrentVersion {
				return false
			}
		}
		return true
	})
	if n, err := cl.DeleteGroup(ctx, "g"); err != nil || n != 1 {
		t.Fatalf("DeleteGroup after the upgrade: %d, %v", n, err)
	}
	close(stop)
	wg.Wait()

	var top uint64
	for _, r := range acked {
		top = max(top, r.Lsn)
	}
	var logs [][]*logstorepb.Transaction
	for _, a := range addrs {
		waitHead(t, a, top)
		logs = append(logs, readAll(t, a, top))
	}
	for i := 1; i < len(logs); i++ {
		sameTxns(t, logs[0], logs[i])
	}
	var acks []ack
	for id, r := range acked {
		acks = append(acks, ack{id: id, req: txnReq(id, fmt.Sprintf("t%c", id[1]), "all"), resp: r})
	}
	checkLog(t, logs[0], acks)
	seen := map[string]bool{}
	for _, txn := range logs[0] {
		if len(txn.Slices) == 0 {
			continue // the offsets-only txn
		}
		id := string(txn.Slices[0].Messages[0].Value)
		if seen[id] {
			t.Fatalf("txn %s twice (lsn %d)", id, txn.Lsn)
		}
		seen[id] = true
	}
	t.Logf("%d acknowledged appends across the upgrade, none failed, none twice", len(acked))
}

// procLeader returns the index in procs of the node leading now.
func procLeader(t testing.TB, cl *client.Client, procs []*logstoretest.Proc) int {
	t.Helper()
	st, err := cl.LeaderStatus(ctxT(t, 60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		if p.Spec.ID == st.NodeId {
			return i
		}
	}
	t.Fatalf("unknown leader %q", st.NodeId)
	return -1
}
