package storeconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// fakeNode answers NextEpoch with the errors in its script (then
// success) and serves Read from a log of head transactions, breaking each
// stream after breakAfter responses (0: never).
type fakeNode struct {
	logstorepb.LogStoreClient
	name       int
	calls      *[]int
	script     []error
	head       uint64
	breakAfter int
	reads      []uint64 // from_lsn of each Read
	role       string   // what Status answers ("": Status fails)
}

func (n *fakeNode) NextEpoch(context.Context, *logstorepb.NextEpochRequest, ...grpc.CallOption) (*logstorepb.NextEpochResponse, error) {
	*n.calls = append(*n.calls, n.name)
	if len(n.script) > 0 {
		err := n.script[0]
		n.script = n.script[1:]
		return nil, err
	}
	return &logstorepb.NextEpochResponse{Epoch: 1}, nil
}

func (n *fakeNode) Read(_ context.Context, req *logstorepb.ReadRequest, _ ...grpc.CallOption) (logstorepb.LogStore_ReadClient, error) {
	n.reads = append(n.reads, req.FromLsn)
	return &fakeRead{n: n, next: req.FromLsn, to: req.ToLsn}, nil
}

type fakeRead struct {
	grpc.ClientStream
	n        *fakeNode
	next, to uint64
	sent     int
}

// Recv sends two transactions a response.
func (r *fakeRead) Recv() (*logstorepb.ReadResponse, error) {
	if r.to != 0 && r.next > r.to {
		return nil, io.EOF
	}
	if r.n.breakAfter > 0 && r.sent == r.n.breakAfter {
		return nil, status.Error(codes.Unavailable, "stream broken")
	}
	if r.next > r.n.head {
		return nil, status.Error(codes.Unavailable, "no more (test)")
	}
	resp := &logstorepb.ReadResponse{}
	for range 2 {
		if r.next > r.n.head || (r.to != 0 && r.next > r.to) {
			break
		}
		resp.Transactions = append(resp.Transactions, &logstorepb.Transaction{Lsn: r.next})
		resp.ReadThroughLsn = r.next
		r.next++
	}
	r.sent++
	return resp, nil
}

func newConn(t *testing.T, nodes []*fakeNode, resolve func(string) (int, bool)) *Conn {
	t.Helper()
	c, err := New(Config{
		Nodes: len(nodes),
		Node: func(_ context.Context, i int) (logstorepb.LogStoreClient, error) {
			return nodes[i], nil
		},
		Resolve:        resolve,
		InitialBackoff: time.Microsecond, MaxBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fakeCluster(n int) ([]*fakeNode, *[]int) {
	calls := &[]int{}
	var nodes []*fakeNode
	for i := range n {
		nodes = append(nodes, &fakeNode{name: i, calls: calls})
	}
	return nodes, calls
}

func nextEpoch(ctx context.Context, _ int, ls logstorepb.LogStoreClient) error {
	_, err := ls.NextEpoch(ctx, &logstorepb.NextEpochRequest{})
	return err
}

// TestCallRetries: a write is retried only after an answer proving it did
// nothing; an idempotent request also after an unknown outcome; nothing
// after a final answer; each retried failure moves to the next node.
func TestCallRetries(t *testing.T) {
	write := Policy{Retry: apierr.NotApplied}
	idem := Policy{Retry: apierr.MaybeApplied}
	unknown := status.Error(codes.Unavailable, "connection reset")
	for _, tc := range []struct {
		name      string
		p         Policy
		script    []error
		wantErr   bool
		wantCalls string
	}{
		{"write after queue full", write, []error{apierr.Newf(logstorepb.ErrorCode_QUEUE_FULL, "x")}, false, "[0 1]"},
		{"write after unreachable", write, []error{fmt.Errorf("%w: test", ErrUnreachable)}, false, "[0 1]"},
		{"write after unknown outcome", write, []error{unknown}, true, "[0]"},
		{"idempotent after unknown outcome", idem, []error{unknown}, false, "[0 1]"},
		{"idempotent after internal", idem, []error{apierr.Newf(logstorepb.ErrorCode_INTERNAL, "x")}, true, "[0]"},
		{"persistent after internal", Policy{Retry: apierr.NodeFault}, []error{apierr.Newf(logstorepb.ErrorCode_INTERNAL, "x")}, false, "[0 1]"},
		{"final", Policy{Retry: apierr.NodeFault}, []error{apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "x")}, true, "[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, calls := fakeCluster(2)
			nodes[0].script = tc.script
			err := newConn(t, nodes, nil).Call(context.Background(), tc.p, nextEpoch)
			if (err != nil) != tc.wantErr || fmt.Sprint(*calls) != tc.wantCalls {
				t.Fatalf("err %v, calls %v; want error %v, calls %s", err, *calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}

// TestCallFollowsNotLeader: a NOT_LEADER answer naming the leader sends
// the next attempt there at once, and later calls go there first.
func TestCallFollowsNotLeader(t *testing.T) {
	nodes, calls := fakeCluster(3)
	nodes[0].script = []error{apierr.New(logstorepb.ErrorCode_NOT_LEADER, "x", func(d *logstorepb.ErrorDetail) { d.LeaderAddress = "node-2" })}
	c := newConn(t, nodes, func(addr string) (int, bool) { return 2, addr == "node-2" })
	p := Policy{Retry: apierr.NotApplied, Leader: true}
	for range 2 {
		if err := c.Call(context.Background(), p, nextEpoch); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(*calls) != "[0 2 2]" || c.Leader() != 2 {
		t.Fatalf("calls %v, leader %d; want [0 2 2], leader 2", *calls, c.Leader())
	}
}

// TestRotation: the cursor stays on a node until it fails (Spread moves it
// at every pick); a failure forgets the node as leader and several
// reports of one failure move the cursor once.
func TestRotation(t *testing.T) {
	nodes, _ := fakeCluster(3)
	c := newConn(t, nodes, nil)
	if a, b := c.Pick(false), c.Pick(true); a != 0 || b != 0 {
		t.Fatalf("picks %d %d, want 0 0", a, b)
	}
	c.Failed(0)
	c.Failed(0)
	if got := c.Pick(false); got != 1 {
		t.Fatalf("after node 0 failed: pick %d, want 1", got)
	}
	c.SetLeader(2)
	if got := c.Pick(true); got != 2 {
		t.Fatalf("leader pick %d, want 2", got)
	}
	c.Failed(2)
	if got := c.Pick(true); got != 1 || c.Leader() != -1 {
		t.Fatalf("after the leader failed: pick %d, leader %d", got, c.Leader())
	}
	c.cfg.Spread = true
	var got []int
	for range 4 {
		got = append(got, c.Pick(false))
	}
	if fmt.Sprint(got) != "[1 2 0 1]" {
		t.Fatalf("spread picks %v", got)
	}
}

// TestCursor pins the continuity rules of a log read.
func TestCursor(t *testing.T) {
	resp := func(rt uint64, lsns ...uint64) *logstorepb.ReadResponse {
		r := &logstorepb.ReadResponse{ReadThroughLsn: rt}
		for _, l := range lsns {
			r.Transactions = append(r.Transactions, &logstorepb.Transaction{Lsn: l})
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		filtered bool
		to       types.LSN
		resp     *logstorepb.ReadResponse
		ok       bool
	}{
		{"dense", false, 0, resp(7, 5, 6, 7), true},
		{"gap", false, 0, resp(8, 5, 6, 8), false},
		{"repeat", false, 0, resp(5, 4, 5), false},
		{"read through skips", false, 0, resp(9, 5, 6), false},
		{"empty unfiltered", false, 0, resp(9), false},
		{"read through below position", true, 0, resp(4), false},
		{"read through below last txn", true, 0, resp(6, 5, 7), false},
		{"filtered skip", true, 0, resp(9, 6, 8), true},
		{"filtered empty", true, 0, resp(9), true},
		{"filtered backwards", true, 0, resp(9, 7, 6), false},
		{"beyond to", true, 8, resp(9, 6), false},
		{"through to", true, 9, resp(9, 6), true},
	} {
		c := NewCursor(5, tc.to, tc.filtered)
		err := c.Take(tc.resp)
		var ce *ContinuityError
		switch {
		case tc.ok && (err != nil || c.Next() != types.LSN(tc.resp.ReadThroughLsn)+1):
			t.Errorf("%s: err %v, next %d", tc.name, err, c.Next())
		case !tc.ok && (!errors.As(err, &ce) || c.Next() != 5):
			t.Errorf("%s: err %v, next %d; want a ContinuityError and the position kept", tc.name, err, c.Next())
		}
	}
}

// TestLogReaderResumes: a log read whose streams break on every node
// resumes on the next node from the LSN after the last one read: every LSN
// once, in order, through ToLsn.
func TestLogReaderResumes(t *testing.T) {
	nodes, _ := fakeCluster(3)
	for _, n := range nodes {
		n.head, n.breakAfter = 100, 3
	}
	c := newConn(t, nodes, nil)
	r := NewLogReader(c, StreamPolicy{Retry: apierr.MaybeApplied}, &logstorepb.ReadRequest{FromLsn: 1, ToLsn: 50}, nil)
	defer r.Close()
	var got []uint64
	for {
		resp, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, txn := range resp.Transactions {
			got = append(got, txn.Lsn)
		}
	}
	for i, lsn := range got {
		if lsn != uint64(i+1) {
			t.Fatalf("position %d holds lsn %d", i, lsn)
		}
	}
	if len(got) != 50 || nodes[1].reads[0] != 7 || nodes[2].reads[0] != 13 {
		t.Fatalf("read %d txns; reopened at %v, %v; want 50, at 7 then 13", len(got), nodes[1].reads, nodes[2].reads)
	}
}

// TestStreamStopsBelowRetention: below retention ends the stream once
// every node answered it (each node once), and ctx's end returns ctx's
// error.
func TestStreamStopsBelowRetention(t *testing.T) {
	nodes, _ := fakeCluster(2)
	c := newConn(t, nodes, nil)
	below := apierr.New(logstorepb.ErrorCode_BELOW_RETENTION, "gone", func(d *logstorepb.ErrorDetail) { d.OldestLsn = 9 })
	asked := map[int]int{}
	s := NewStream(c, StreamPolicy{Retry: apierr.Final}, func(_ context.Context, node int, _ logstorepb.LogStoreClient) (func() (int, error), error) {
		asked[node]++
		return nil, below
	})
	if _, err := s.Next(context.Background()); !errors.Is(err, below) || len(asked) != 2 || asked[0] != 1 || asked[1] != 1 {
		t.Fatalf("err %v after asking %v, want the below-retention error after each node once", err, asked)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// TestStreamBelowRetentionOnOneNodeReadsAnother: retention is per node, so
// a position one node (here the leader, asked first) deleted is read from
// a node that still holds it.
func TestStreamBelowRetentionOnOneNodeReadsAnother(t *testing.T) {
	nodes, _ := fakeCluster(3)
	c := newConn(t, nodes, nil)
	c.SetLeader(1)
	below := apierr.New(logstorepb.ErrorCode_BELOW_RETENTION, "gone", func(d *logstorepb.ErrorDetail) { d.OldestLsn = 9 })
	var asked []int
	s := NewStream(c, StreamPolicy{Retry: apierr.Final, Leader: true}, func(_ context.Context, node int, _ logstorepb.LogStoreClient) (func() (int, error), error) {
		asked = append(asked, node)
		if node != 2 {
			return nil, below
		}
		return func() (int, error) { return 42, nil }, nil
	})
	defer s.Close()
	got, err := s.Next(context.Background())
	if err != nil || got != 42 || s.Node() != 2 {
		t.Fatalf("got %d, %v from node %d after asking %v; want 42 from node 2", got, err, s.Node(), asked)
	}
	if len(asked) > 3 || asked[0] != 1 {
		t.Fatalf("asked %v, want the leader first and each node at most once", asked)
	}
}

// TestCallKeepsUnknownOutcome: an idempotent request whose first attempt
// ended with an unknown outcome, then refused before Raft until its
// deadline, may have been applied: the call's error says its outcome is
// unknown, not the last refusal (which alone would read as "not applied").
// TestNemesis found it: a producer's Append that timed out on a leader
// that was being cut off came back as NOT_LEADER.
func TestCallKeepsUnknownOutcome(t *testing.T) {
	notLeader := apierr.Newf(logstorepb.ErrorCode_NOT_LEADER, "follower")
	refusals := func() []error {
		out := make([]error, 100000)
		for i := range out {
			out[i] = notLeader
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		first error
		want  apierr.Outcome
	}{
		{"after an unknown outcome", status.Error(codes.Unavailable, "connection reset"), apierr.MaybeApplied},
		{"after refusals only", notLeader, apierr.NotApplied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, _ := fakeCluster(2)
			nodes[0].script = append([]error{tc.first}, refusals()...)
			nodes[1].script = refusals()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			err := newConn(t, nodes, nil).Call(ctx, Policy{Retry: apierr.MaybeApplied}, nextEpoch)
			if err == nil {
				t.Fatal("call succeeded")
			}
			if got := apierr.Classify(err); got != tc.want {
				t.Fatalf("error %v classified %v, want %v", err, got, tc.want)
			}
		})
	}
}

// TestCallUnreachableUntilDeadline: a call that could reach no node before
// its deadline ends with an error that is the deadline's (what a caller
// outside this module can test: ErrUnreachable is internal), and still
// wraps ErrUnreachable. The demo workload, given short deadlines by
// TestNemesis, stopped on the bare ErrUnreachable (not retryable to it)
// while the leader was killed.
func TestCallUnreachableUntilDeadline(t *testing.T) {
	c, err := New(Config{
		Nodes: 2,
		Node: func(context.Context, int) (logstorepb.LogStoreClient, error) {
			return nil, fmt.Errorf("%w: test", ErrUnreachable)
		},
		InitialBackoff: time.Microsecond, MaxBackoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = c.Call(ctx, Policy{Retry: apierr.MaybeApplied}, nextEpoch)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("error %v: want one wrapping context.DeadlineExceeded and ErrUnreachable", err)
	}
}

// TestCallFinalAnswerAfterUnknownOutcome: a retried call whose first
// attempt may have committed and whose last is a final refusal keeps the
// refusal's code and detail (the caller branches on them) but states the
// call's outcome, AppliedMaybe: the refusal says only that the last
// attempt wrote nothing.
func TestCallFinalAnswerAfterUnknownOutcome(t *testing.T) {
	nodes, calls := fakeCluster(2)
	nodes[0].script = []error{status.Error(codes.Unavailable, "connection reset")}
	nodes[1].script = []error{apierr.New(logstorepb.ErrorCode_CONDITION_FAILED, "topic t at 3",
		func(d *logstorepb.ErrorDetail) { d.Topic, d.ActualNextOffset = "t", 3 })}
	err := newConn(t, nodes, nil).Call(context.Background(), Policy{Retry: apierr.MaybeApplied}, nextEpoch)
	if fmt.Sprint(*calls) != "[0 1]" {
		t.Fatalf("calls %v, want [0 1]", *calls)
	}
	if d := apierr.Detail(err); d == nil || d.Code != logstorepb.ErrorCode_CONDITION_FAILED || d.ActualNextOffset != 3 {
		t.Fatalf("error %v: want the CONDITION_FAILED refusal with its detail", err)
	}
	if got := apierr.AppliedOf(err); got != apierr.AppliedMaybe {
		t.Fatalf("error %v: applied %v, want maybe (the first attempt may have committed)", err, got)
	}
}
