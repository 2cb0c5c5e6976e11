package logstore_test

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestReplicasWithDifferentProducerLimitsStayIdentical: three nodes
// configured with different MaxProducers and ProducerIdleExpiry, each
// leading in turn. Every entry applies with its leader's limits on every
// replica (eviction and expiry decide whether a producer's retry is a
// duplicate or a new write), so the FSM states and segment logs end
// identical. With each node applying its own config, the replicas would
// disagree on those retries and write different logs.
func TestReplicasWithDifferentProducerLimitsStayIdentical(t *testing.T) {
	type limits struct {
		maxProducers int
		idle         time.Duration
	}
	lims := map[string]limits{"n0": {2, time.Hour}, "n1": {3, 2 * time.Hour}, "n2": {5, 3 * time.Hour}}
	var skew atomic.Int64 // every node's clock runs this far ahead
	c := startCluster(t, 3, func(cfg *logstore.Config) {
		cfg.AllowLegacyProducers = true // the legacy producer table's limits
		cfg.MaxProducers, cfg.ProducerIdleExpiry = lims[cfg.ID].maxProducers, lims[cfg.ID].idle
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		cfg.SegmentBytes = 4 << 10
	})
	ctx := ctxT(t, 120*time.Second)
	// appendOn sends req to node n (the leader), again while n is not
	// leader yet (right after a transfer).
	appendOn := func(n *logstore.Node, req *logstorepb.AppendRequest) *logstorepb.AppendResponse {
		t.Helper()
		cl := rawConn(t, n.APIAddr())
		var resp *logstorepb.AppendResponse
		testwait.For(t, 30*time.Second, "append on "+n.ID(), func() bool {
			var err error
			resp, err = cl.Append(ctx, req)
			if apierr.CodeOf(err) == logstorepb.ErrorCode_NOT_LEADER {
				return false
			}
			if err != nil {
				t.Fatalf("append %v on %s: %v", req.ProducerId, n.ID(), err)
			}
			return true
		})
		return resp
	}
	producerReq := func(id string) *logstorepb.AppendRequest {
		req := txnReq(id, "a", "b")
		req.ProducerId, req.Sequence = id, 1
		return req
	}
	order := []int{0, 1, 2, 0}
	for round, li := range order {
		leader := c.Nodes[li]
		if !leader.IsLeader() {
			cur := c.waitLeader()
			if err := cur.Raft().LeadershipTransferToServer(raft.ServerID(leader.ID()), raft.ServerAddress(leader.RaftAddr())).Error(); err != nil {
				t.Fatalf("transfer leadership to %s: %v", leader.ID(), err)
			}
			testwait.For(t, 60*time.Second, leader.ID()+" leads", leader.IsLeader)
		}
		lim := lims[leader.ID()]
		for i := range 5 {
			appendOn(leader, producerReq(fmt.Sprintf("r%d-p%d", round, i)))
		}
		// p0 is still in the table only when it holds 5 producers.
		retry := appendOn(leader, producerReq(fmt.Sprintf("r%d-p0", round)))
		if want := lim.maxProducers >= 5; retry.Duplicate != want {
			t.Fatalf("round %d (leader %s, MaxProducers %d): retry of evicted-or-not p0 duplicate=%v, want %v",
				round, leader.ID(), lim.maxProducers, retry.Duplicate, want)
		}
		// 90 minutes of log time later, a sweep drops p4 only when the
		// leader's idle expiry is below that.
		skew.Add(int64(90 * time.Minute))
		appendOn(leader, txnReq(fmt.Sprintf("r%d-tick", round), "a"))
		retry = appendOn(leader, producerReq(fmt.Sprintf("r%d-p4", round)))
		if want := lim.idle > 90*time.Minute; retry.Duplicate != want {
			t.Fatalf("round %d (leader %s, ProducerIdleExpiry %v): retry of idle p4 duplicate=%v, want %v",
				round, leader.ID(), lim.idle, retry.Duplicate, want)
		}
	}

	var states [][]byte
	testwait.For(t, 60*time.Second, "every replica applies the same entries", func() bool {
		states = states[:0]
		var idx []uint64
		for _, n := range c.Nodes {
			s, i := logstore.FSMStateForTest(n)
			states, idx = append(states, s), append(idx, i)
		}
		return idx[0] == idx[1] && idx[1] == idx[2]
	})
	for i := 1; i < len(states); i++ {
		if !bytes.Equal(states[i], states[0]) {
			t.Fatalf("FSM state of %s differs from n0's", c.Nodes[i].ID())
		}
	}
	head := c.Nodes[0].HeadLSN()
	var files []map[string][]byte
	for i, n := range c.Nodes {
		if h := n.HeadLSN(); h != head {
			t.Fatalf("%s head %d, n0 %d", n.ID(), h, head)
		}
		if err := n.SegmentLog().Sync(); err != nil {
			t.Fatal(err)
		}
		files = append(files, segmentFiles(t, c.Configs[i].Dir))
	}
	for i := 1; i < len(files); i++ {
		if len(files[i]) != len(files[0]) {
			t.Fatalf("%s has %d segment files, n0 %d", c.Nodes[i].ID(), len(files[i]), len(files[0]))
		}
		for name, b := range files[0] {
			if !bytes.Equal(files[i][name], b) {
				t.Fatalf("segment file %s differs between n0 and %s", name, c.Nodes[i].ID())
			}
		}
	}
}
