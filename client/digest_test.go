package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestSequenceReusedIsNeverSuccess: another writer commits other content
// under a registered producer's sequence (its id and epoch copied) while
// the producer's own first attempt of that sequence is lost, and the
// producer's retry then meets that sequence. Before the cluster kept a
// digest of each remembered request (issue #12 defect 7), the retry was
// answered `duplicate` with the other writer's result, and the SDK, whose
// first attempt may have committed, reported success for data that was
// never written. Now the cluster answers SEQUENCE_REUSED and the SDK
// returns a *SequenceError (Conflict), and the producer's data is not in
// the log.
func TestSequenceReusedIsNeverSuccess(t *testing.T) {
	var hijacked atomic.Bool
	hijack := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var reqs []*logstorepb.AppendRequest
		switch r := req.(type) {
		case *logstorepb.AppendRequest:
			reqs = []*logstorepb.AppendRequest{r}
		case *logstorepb.AppendBatchRequest:
			reqs = r.Requests
		}
		took := false
		for _, r := range reqs {
			if r.ProducerEpoch != 0 && r.Sequence == 2 && !hijacked.Load() {
				hijacked.Store(true)
				took = true
				for _, s := range r.Slices {
					for _, m := range s.Messages {
						m.Value = []byte("other")
					}
				}
			}
		}
		resp, err := handler(ctx, req)
		if took { // the other writer's answer is not the producer's
			return nil, status.Error(codes.Unavailable, "test: attempt lost")
		}
		return resp, err
	}
	c := logstoretest.Start(t, 1, nil, grpc.ChainUnaryInterceptor(hijack))
	cl := newClient(t, c.Addrs()...)
	ctx := ctxT(t, 60*time.Second)
	p := newProducer(t, cl, client.ProducerConfig{ID: "p"})
	if _, err := p.Append(ctx, client.NewTxn().Add("t", []byte("one"))); err != nil {
		t.Fatal(err)
	}
	res, err := p.Append(ctx, client.NewTxn().Add("t", []byte("two")))
	var se *client.SequenceError
	if !errors.As(err, &se) || !se.Conflict || se.Sequence != 2 || !errors.Is(err, client.ErrSequenceMismatch) ||
		apierr.CodeOf(err) != logstorepb.ErrorCode_SEQUENCE_REUSED {
		t.Fatalf("retry of a sequence holding other content: %+v, %v; want *SequenceError (Conflict, SEQUENCE_REUSED)", res, err)
	}
	if !hijacked.Load() {
		t.Fatal("the test's writer never ran")
	}
	got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "t")
	if len(got) != 2 || len(got["one"]) != 1 || len(got["other"]) != 1 || got["two"] != nil {
		t.Fatalf("log values %v, want one and other once, two never", got)
	}
	if _, err := p.Append(ctx, client.NewTxn().Add("t", []byte("three"))); !errors.Is(err, client.ErrSequenceMismatch) {
		t.Fatalf("the broken producer appended again: %v", err)
	}
}
