package logstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestRecoverLostQuorumProcess: 3 node processes, 2 of them killed for
// good; the survivor restarted with Recover (store --recover) becomes a
// single-voter cluster holding every write it had, takes new writes, and
// grows again with AddVoter (a new process receives the whole log).
func TestRecoverLostQuorumProcess(t *testing.T) {
	procs := logstoretest.NewProcCluster(t, 3, "")
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.Spec.APIAddr)
	}
	cl := newClient(t, addrs...)
	acks := appendLoad(t, cl, 4, 25, "pre")
	top := maxLSN(acks)
	st, err := cl.LeaderStatus(ctxT(t, 60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	survivor := 0
	if procs[0].Spec.ID == st.NodeId {
		survivor = 1 // the survivor is a follower: the leader is among the lost
	}
	sc := rawConn(t, procs[survivor].Spec.APIAddr)
	testwait.For(t, 60*time.Second, "the survivor applies every acknowledged write", func() bool {
		s, err := sc.Status(ctxT(t, 5*time.Second), &logstorepb.StatusRequest{})
		return err == nil && s.HeadLsn >= top
	})
	for _, p := range procs {
		p.Kill() // the other two are gone for good
	}

	p := procs[survivor]
	p.Spec.Recover = true
	p.Start(t)
	rc := newClient(t, p.Spec.APIAddr)
	testwait.For(t, 60*time.Second, "the recovered node leads alone", func() bool {
		s, err := rc.LeaderStatus(ctxT(t, 5*time.Second))
		return err == nil && s.NodeId == p.Spec.ID && len(s.Servers) >= 1
	})
	after := appendLoad(t, rc, 2, 10, "after")
	if m := maxLSN(after); m <= top {
		t.Fatalf("recovered cluster acked lsn %d, not after %d", m, top)
	}
	all := append(acks, after...)
	checkLog(t, readAll(t, p.Spec.APIAddr, maxLSN(after)), all)

	// Grow it again: a new node joins and receives the log.
	n := &logstoretest.Proc{Spec: logstoretest.ProcSpec{ID: "n9", Dir: filepath.Join(t.TempDir(), "n9"),
		RaftAddr: logstoretest.FreeAddr(t), APIAddr: logstoretest.FreeAddr(t)}}
	n.Start(t)
	t.Cleanup(n.Kill)
	if err := rc.AddVoter(ctxT(t, 60*time.Second), n.Spec.ID, n.Spec.RaftAddr, n.Spec.APIAddr); err != nil {
		t.Fatal(err)
	}
	nc := rawConn(t, n.Spec.APIAddr)
	testwait.For(t, 60*time.Second, "the new voter catches up", func() bool {
		s, err := nc.Status(ctxT(t, 5*time.Second), &logstorepb.StatusRequest{})
		return err == nil && s.HeadLsn >= maxLSN(after)
	})
	checkLog(t, readAll(t, n.Spec.APIAddr, maxLSN(after)), all)
	more := appendLoad(t, newClient(t, p.Spec.APIAddr, n.Spec.APIAddr), 2, 5, "grown")
	checkLog(t, readAll(t, n.Spec.APIAddr, maxLSN(more)), append(all, more...))
}
