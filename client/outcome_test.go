package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// denyTopic is a server interceptor that refuses every Append (or
// AppendBatch) touching topic before its handler runs, with the error
// package security's interceptor answers: PERMISSION_DENIED naming the
// topic. Nothing of a refused call reaches Raft.
func denyTopic(topic string) grpc.ServerOption {
	touches := func(req *logstorepb.AppendRequest) bool {
		for _, s := range req.Slices {
			if s.Topic == topic {
				return true
			}
		}
		return false
	}
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		var reqs []*logstorepb.AppendRequest
		switch r := req.(type) {
		case *logstorepb.AppendRequest:
			reqs = []*logstorepb.AppendRequest{r}
		case *logstorepb.AppendBatchRequest:
			reqs = r.Requests
		}
		for _, r := range reqs {
			if touches(r) {
				return nil, apierr.New(logstorepb.ErrorCode_PERMISSION_DENIED, "test: topic "+topic+" refused",
					func(d *logstorepb.ErrorDetail) { d.Topic = topic })
			}
		}
		return h(ctx, req)
	})
}

// TestProducerRefusedBeforeRaftIsNotInDoubt: an Append refused before its
// handler ran (PERMISSION_DENIED, as the security interceptor answers)
// wrote nothing. The producer reports the refusal itself, not an
// *InDoubtError, frees the sequence, and the next Append goes out at once
// under it.
func TestProducerRefusedBeforeRaftIsNotInDoubt(t *testing.T) {
	c := logstoretest.Start(t, 1, nil, denyTopic("secret"))
	cl := newClient(t, c.Addrs()...)
	p := newProducer(t, cl, client.ProducerConfig{ID: "refused"})
	ctx := ctxT(t, 60*time.Second)
	_, err := p.Append(ctx, client.NewTxn().Add("secret", []byte("no")))
	if errors.Is(err, client.ErrInDoubt) || apierr.CodeOf(err) != logstorepb.ErrorCode_PERMISSION_DENIED {
		t.Fatalf("append refused before Raft: %v, want the PERMISSION_DENIED refusal, not in doubt", err)
	}
	res, err := p.Append(ctx, client.NewTxn().Add("open", []byte("yes")))
	if err != nil || res.Sequence != 1 {
		t.Fatalf("append after the refusal = %+v, %v; want sequence 1 (the refused one wrote nothing)", res, err)
	}
}

// TestProducerRefusalAfterLostResponseIsInDoubt: a producer's first
// attempt commits and its response is lost (the outcome is unknown);
// meanwhile the topic's schema changes, so the retry of the same request
// is refused at the edge (SCHEMA_MISMATCH). That refusal says only that
// the retry wrote nothing: the first attempt did commit. The producer must
// not report the transaction as not written (and hand its sequence to
// other data): it answers the duplicate's result, or reports the
// transaction in doubt.
func TestProducerRefusalAfterLostResponseIsInDoubt(t *testing.T) {
	var (
		cl      atomic.Pointer[client.Client]
		changed atomic.Bool
	)
	// After the first Append of topic "kv" commits, declare "kv" KV (its
	// value is no mutation) and lose the response.
	lose := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		for _, r := range logstoretest.AnsweredAppends(req, resp, err) {
			if len(r.Slices) == 1 && r.Slices[0].Topic == "kv" && changed.CompareAndSwap(false, true) {
				if _, err := cl.Load().CreateTopic(ctx, &logstorepb.TopicDeclaration{Topic: "kv", Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_KV}); err != nil {
					return nil, status.Errorf(codes.Internal, "test: change the schema: %v", err)
				}
				return nil, status.Error(codes.Unavailable, "test: response lost after commit")
			}
		}
		return resp, err
	})
	c := logstoretest.Start(t, 1, nil, lose)
	cl.Store(newClient(t, c.Addrs()...))
	p := newProducer(t, cl.Load(), client.ProducerConfig{ID: "schema-change"})
	ctx := ctxT(t, 60*time.Second)
	res, err := p.Append(ctx, client.NewTxn().Add("kv", []byte("not a mutation")))
	if !changed.Load() {
		t.Fatal("the interceptor lost no response")
	}
	switch {
	case err == nil && res.Duplicate && res.Sequence == 1:
		// The retry was answered as the duplicate it is.
	case errors.Is(err, client.ErrInDoubt):
	default:
		t.Fatalf("append whose first attempt committed = %+v, %v; want the duplicate's result or in doubt, not a refusal", res, err)
	}
}

// TestServerErrorsStateApplied: errors a real LogStore node sends over
// gRPC carry ErrorDetail.applied, read with a bare stub (no SDK in
// between): a refusal at the edge, a refusal by apply (a failed condition,
// which went through Raft), a read's refusal, and the batched form of the
// writes, all APPLIED_NO; and the refused writes changed nothing.
func TestServerErrorsStateApplied(t *testing.T) {
	c := logstoretest.Start(t, 1, nil)
	cc, err := grpc.NewClient(c.Addrs()[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ls := logstorepb.NewLogStoreClient(cc)
	ctx := ctxT(t, 60*time.Second)
	if _, err := ls.Append(ctx, client.NewTxn().Add("t", []byte("a")).Request()); err != nil {
		t.Fatal(err)
	}
	empty := client.NewTxn().Request()
	stale := client.NewTxn().Add("t", []byte("b")).Expect("t", 0).Request() // "t" is at 1
	check := func(what string, err error, want logstorepb.ErrorCode) {
		t.Helper()
		d := apierr.Detail(err)
		if d == nil || d.Code != want {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		if d.Applied != logstorepb.Applied_APPLIED_NO {
			t.Fatalf("%s: detail %v: applied %v on the wire, want APPLIED_NO", what, d, d.Applied)
		}
	}
	_, err = ls.Append(ctx, empty)
	check("empty transaction", err, logstorepb.ErrorCode_EMPTY_TRANSACTION)
	_, err = ls.Append(ctx, stale)
	check("failed condition", err, logstorepb.ErrorCode_CONDITION_FAILED)
	rs, err := ls.ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: "never-written"})
	if err == nil {
		_, err = rs.Recv()
	}
	check("read of an unknown topic", err, logstorepb.ErrorCode_UNKNOWN_TOPIC)
	batch, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{empty, stale}})
	if err != nil || len(batch.Results) != 2 {
		t.Fatalf("AppendBatch = %v, %v", batch, err)
	}
	for i, want := range []logstorepb.ErrorCode{logstorepb.ErrorCode_EMPTY_TRANSACTION, logstorepb.ErrorCode_CONDITION_FAILED} {
		if d := batch.Results[i].GetError().GetDetail(); d.GetCode() != want || d.GetApplied() != logstorepb.Applied_APPLIED_NO {
			t.Fatalf("batched result %d: detail %v, want %v stating APPLIED_NO", i, d, want)
		}
	}
	if st, err := ls.Status(ctx, &logstorepb.StatusRequest{}); err != nil || st.HeadLsn != 1 {
		t.Fatalf("status %v, %v: want head 1 (the refused writes wrote nothing)", st, err)
	}
}
