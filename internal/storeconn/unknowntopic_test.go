package storeconn

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func (n *fakeNode) Status(context.Context, *logstorepb.StatusRequest, ...grpc.CallOption) (*logstorepb.StatusResponse, error) {
	if n.role == "" {
		return nil, status.Error(codes.Unavailable, "down")
	}
	return &logstorepb.StatusResponse{Role: n.role, RaftTerm: 1}, nil
}

var errUnknownTopic = apierr.New(logstorepb.ErrorCode_UNKNOWN_TOPIC, "no such topic", func(d *logstorepb.ErrorDetail) { d.Topic = "t" })

// TestStreamUnknownTopicOnFollowerAsksLeader: a follower that has not
// applied a topic's first write yet answers UNKNOWN_TOPIC; the stream asks
// the leader, which serves it.
func TestStreamUnknownTopicOnFollowerAsksLeader(t *testing.T) {
	nodes, _ := fakeCluster(3)
	nodes[0].role, nodes[1].role, nodes[2].role = "follower", "follower", "leader"
	c := newConn(t, nodes, nil)
	var asked []int
	s := NewStream(c, StreamPolicy{Retry: apierr.MaybeApplied}, func(_ context.Context, node int, _ logstorepb.LogStoreClient) (func() (int, error), error) {
		asked = append(asked, node)
		if node != 2 {
			return nil, errUnknownTopic
		}
		return func() (int, error) { return 42, nil }, nil
	})
	defer s.Close()
	if got, err := s.Next(context.Background()); err != nil || got != 42 {
		t.Fatalf("got %d, %v after asking %v; want 42 from the leader", got, err, asked)
	}
	if len(asked) != 2 || asked[0] != 0 || asked[1] != 2 {
		t.Fatalf("asked %v, want node 0 then the leader (2)", asked)
	}
}

// TestStreamUnknownTopicFinalAtLeader: the leader's UNKNOWN_TOPIC is final
// (it applied every acknowledged write) even while another node is down, so
// a typo does not wait for a dead node.
func TestStreamUnknownTopicFinalAtLeader(t *testing.T) {
	nodes, _ := fakeCluster(3)
	nodes[1].role = "leader" // 0 and 2 are down
	c := newConn(t, nodes, nil)
	var asked []int
	s := NewStream(c, StreamPolicy{Retry: apierr.MaybeApplied}, func(_ context.Context, node int, _ logstorepb.LogStoreClient) (func() (int, error), error) {
		asked = append(asked, node)
		if node != 1 {
			return nil, status.Error(codes.Unavailable, "down")
		}
		return nil, errUnknownTopic
	})
	defer s.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, errUnknownTopic) {
		t.Fatalf("err %v after asking %v, want the leader's UNKNOWN_TOPIC", err, asked)
	}
}

// TestStreamUnknownTopicEveryNode: with no leader known, UNKNOWN_TOPIC is
// final once every node answered it.
func TestStreamUnknownTopicEveryNode(t *testing.T) {
	nodes, _ := fakeCluster(2)
	nodes[0].role, nodes[1].role = "candidate", "candidate"
	c := newConn(t, nodes, nil)
	asked := map[int]int{}
	s := NewStream(c, StreamPolicy{Retry: apierr.MaybeApplied}, func(_ context.Context, node int, _ logstorepb.LogStoreClient) (func() (int, error), error) {
		asked[node]++
		return nil, errUnknownTopic
	})
	if _, err := s.Next(context.Background()); !errors.Is(err, errUnknownTopic) || asked[0] != 1 || asked[1] != 1 {
		t.Fatalf("err %v after asking %v, want UNKNOWN_TOPIC after each node once", err, asked)
	}
}
