package logstore_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestAppendBatch: each request of a batch is its own transaction with its
// own answer, in request order; a refused request writes nothing and does
// not fail the others; a producer retry inside a batch is a duplicate.
func TestAppendBatch(t *testing.T) {
	c := startCluster(t, 1, allowLegacyProducers)
	ls := rawConn(t, c.Nodes[0].APIAddr())
	ctx := ctxT(t, 30*time.Second)
	prod := txnReq("p", "b")
	prod.ProducerId, prod.Sequence = "producer-b", 1
	reqs := []*logstorepb.AppendRequest{
		txnReq("1", "a", "b"),
		txnReq("bad", "a", "a"), // DUPLICATE_TOPIC
		prod,
		{}, // EMPTY_TRANSACTION
		txnReq("3", "a"),
		prod, // the same sequence again: answered from the producer table
	}
	resp, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: reqs})
	if err != nil || len(resp.Results) != len(reqs) {
		t.Fatalf("AppendBatch: %v %v", resp, err)
	}
	r := resp.Results
	wantErr := func(i int, ec logstorepb.ErrorCode) {
		t.Helper()
		err := apierr.Decode(r[i].GetError())
		if r[i].Response != nil || status.Code(err) != codes.InvalidArgument || apierr.CodeOf(err) != ec {
			t.Fatalf("result %d: %v, want %v", i, r[i], ec)
		}
	}
	wantErr(1, logstorepb.ErrorCode_DUPLICATE_TOPIC)
	wantErr(3, logstorepb.ErrorCode_EMPTY_TRANSACTION)
	for i, lsn := range map[int]uint64{0: 1, 2: 2, 4: 3} {
		if r[i].Error != nil || r[i].Response.GetLsn() != lsn || r[i].Response.Duplicate {
			t.Fatalf("result %d: %v, want LSN %d", i, r[i], lsn)
		}
	}
	if d := r[5].GetResponse(); d == nil || !d.Duplicate || d.Lsn != 2 {
		t.Fatalf("producer retry in the batch: %v", r[5])
	}
	// Offsets are dense per topic in request order: a at 0 (LSN 1), 1 (LSN 3);
	// b at 0 (LSN 1), 1 (LSN 2).
	if r[4].Response.Slices[0].FirstOffset != 1 || r[2].Response.Slices[0].FirstOffset != 1 {
		t.Fatalf("offsets: %v / %v", r[4].Response, r[2].Response)
	}
	if h := c.Nodes[0].HeadLSN(); h != 3 {
		t.Fatalf("head %d, want 3", h)
	}
	got := readAll(t, c.Nodes[0].APIAddr(), 3)
	for i, id := range []string{"1", "p", "3"} {
		if string(got[i].Slices[0].Messages[0].Value) != id {
			t.Fatalf("LSN %d holds %q, want %q", i+1, got[i].Slices[0].Messages[0].Value, id)
		}
	}
}

// TestAppendBatchRefusedWhole: an empty or oversize batch, or one sent to a
// follower, is refused as a whole and writes nothing.
func TestAppendBatchRefusedWhole(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader := c.waitLeader()
	ctx := ctxT(t, 60*time.Second)
	if _, err := newClient(t, c.addrs()...).Append(ctx, txnReq("warm", "a")); err != nil {
		t.Fatal(err) // also waits for member registration to commit
	}
	ls := rawConn(t, leader.APIAddr())
	_, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{})
	if status.Code(err) != codes.InvalidArgument || apierr.CodeOf(err) != logstorepb.ErrorCode_INVALID_ARGUMENT {
		t.Fatalf("empty batch: %v", err)
	}
	over := &logstorepb.AppendBatchRequest{}
	for range logstore.MaxAppendBatchRequests + 1 {
		over.Requests = append(over.Requests, txnReq("x", "a"))
	}
	_, err = ls.AppendBatch(ctx, over)
	if status.Code(err) != codes.InvalidArgument || apierr.Detail(err).GetLimit() != logstore.MaxAppendBatchRequests {
		t.Fatalf("oversize batch: %v", err)
	}
	for _, n := range c.Nodes {
		if n == leader {
			continue
		}
		var err error
		testwait.For(t, 30*time.Second, "follower knows the leader's address", func() bool {
			_, err = rawConn(t, n.APIAddr()).AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{txnReq("x", "a")}})
			return apierr.Detail(err).GetLeaderAddress() != ""
		})
		if d := apierr.Detail(err); status.Code(err) != codes.Unavailable || d.Code != logstorepb.ErrorCode_NOT_LEADER || d.LeaderAddress != leader.APIAddr() {
			t.Fatalf("follower %s: %v", n.ID(), err)
		}
	}
	if h := leader.HeadLSN(); h != 1 {
		t.Fatalf("refused batches wrote: head %d, want 1", h)
	}
}
