package logstore_test

import (
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/grpcedge/edgetest"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestOversizeAtTheEdge: requests above gRPC's default 4 MiB receive limit
// get our typed REQUEST_TOO_LARGE with the limit, not gRPC's own
// RESOURCE_EXHAUSTED text, and write nothing; an AppendBatch of requests
// that are each within the limit is answered per request.
func TestOversizeAtTheEdge(t *testing.T) {
	c := startCluster(t, 1, nil)
	c.waitLeader()
	ls := rawConn(t, c.Nodes[0].APIAddr())
	big := func(topic string, n, size int) *logstorepb.AppendRequest {
		s := &logstorepb.Slice{Topic: topic}
		for range n {
			s.Messages = append(s.Messages, msg(size))
		}
		return &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{s}}
	}
	// 5 MiB in one Append.
	_, err := ls.Append(ctxT(t, 30*time.Second), big("a", 5, 1<<20))
	if status.Code(err) != codes.InvalidArgument || apierr.CodeOf(err) != logstorepb.ErrorCode_REQUEST_TOO_LARGE {
		t.Fatalf("5 MiB Append: %v, want INVALID_ARGUMENT REQUEST_TOO_LARGE", err)
	}
	if d := apierr.Detail(err); d.Limit != logstore.DefaultMaxRequestBytes {
		t.Fatalf("limit %d, want %d", d.Limit, logstore.DefaultMaxRequestBytes)
	}
	// Two valid 2.55 MB requests in one AppendBatch: both written.
	resp, err := ls.AppendBatch(ctxT(t, 30*time.Second), &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{
		big("a", 3, 850_000), big("b", 3, 850_000)}})
	if err != nil {
		t.Fatalf("AppendBatch of two 2.55 MB requests: %v", err)
	}
	for i, r := range resp.Results {
		if r.Error != nil {
			t.Fatalf("request %d: %v", i, r.Error)
		}
	}
	// A 5 MiB request inside a batch gets its own typed error.
	resp, err = ls.AppendBatch(ctxT(t, 30*time.Second), &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{
		big("a", 1, 10), big("a", 5, 1<<20)}})
	if err != nil {
		t.Fatalf("AppendBatch with one oversize request: %v", err)
	}
	if resp.Results[0].Error != nil || resp.Results[1].Error.GetDetail().GetCode() != logstorepb.ErrorCode_REQUEST_TOO_LARGE {
		t.Fatalf("results %v, want ok and REQUEST_TOO_LARGE", resp.Results)
	}
	st, err := ls.Status(ctxT(t, 10*time.Second), &logstorepb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.HeadLsn != 3 {
		t.Fatalf("head %d, want 3 (the oversize requests wrote nothing)", st.HeadLsn)
	}
}

// TestOversizeBatch: an AppendBatch whose encoded size is above the batch
// limit (4 x MaxRequestBytes) but within the receive limit is refused as a
// whole with REQUEST_TOO_LARGE and the batch limit.
func TestOversizeBatch(t *testing.T) {
	const req = 64 << 10
	c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.MaxRequestBytes, cfg.MaxMessageBytes = req, req/2 })
	c.waitLeader()
	ls := rawConn(t, c.Nodes[0].APIAddr())
	var reqs []*logstorepb.AppendRequest
	for range 5 { // 5 x ~60 KiB: above 4 x 64 KiB, below it + 64 KiB
		reqs = append(reqs, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "a",
			Messages: []*logstorepb.Message{msg(30 << 10), msg(30 << 10)}}}})
	}
	_, err := ls.AppendBatch(ctxT(t, 30*time.Second), &logstorepb.AppendBatchRequest{Requests: reqs})
	if status.Code(err) != codes.InvalidArgument || apierr.CodeOf(err) != logstorepb.ErrorCode_REQUEST_TOO_LARGE {
		t.Fatalf("oversize AppendBatch: %v, want INVALID_ARGUMENT REQUEST_TOO_LARGE", err)
	}
	if d := apierr.Detail(err); d.Limit != 4*req {
		t.Fatalf("limit %d, want %d", d.Limit, 4*req)
	}
}

// TestMalformedRequest: bytes that are not a valid request answer
// INVALID_ARGUMENT with an ErrorDetail (not gRPC's INTERNAL "failed to
// unmarshal"), for a unary and a streaming RPC, and write nothing.
func TestMalformedRequest(t *testing.T) {
	c := startCluster(t, 1, nil)
	c.waitLeader()
	cc := edgetest.Conn(t, c.Nodes[0].APIAddr())
	ctx := ctxT(t, 30*time.Second)
	edgetest.WantInvalid(t, "Append", edgetest.Unary(ctx, cc, logstorepb.LogStore_Append_FullMethodName, edgetest.Garbage))
	edgetest.WantInvalid(t, "AppendBatch", edgetest.Unary(ctx, cc, logstorepb.LogStore_AppendBatch_FullMethodName, edgetest.Garbage))
	edgetest.WantInvalid(t, "Read", edgetest.Stream(ctx, cc, logstorepb.LogStore_Read_FullMethodName, edgetest.Garbage))
	// A string field with invalid UTF-8 is malformed too (topic "\xff").
	edgetest.WantInvalid(t, "Append bad utf8", edgetest.Unary(ctx, cc, logstorepb.LogStore_Append_FullMethodName,
		[]byte{0x0a, 0x03, 0x0a, 0x01, 0xff}))
	st, err := rawConn(t, c.Nodes[0].APIAddr()).Status(ctx, &logstorepb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.HeadLsn != 0 {
		t.Fatalf("head %d, want 0 (nothing written)", st.HeadLsn)
	}
}

// TestReadUnknownTopic: a ReadTopic of a topic that was never written
// answers NOT_FOUND UNKNOWN_TOPIC naming the topic, with and without
// follow (a typo must not wait forever); a written topic read past its end
// is not an error.
func TestReadUnknownTopic(t *testing.T) {
	c := startCluster(t, 1, nil)
	c.waitLeader()
	ls := rawConn(t, c.Nodes[0].APIAddr())
	ctx := ctxT(t, 30*time.Second)
	read := func(topic string, follow bool) error {
		st, err := ls.ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: topic, Follow: follow})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	for _, follow := range []bool{false, true} {
		err := read("no-such-topic", follow)
		if status.Code(err) != codes.NotFound || apierr.CodeOf(err) != logstorepb.ErrorCode_UNKNOWN_TOPIC {
			t.Fatalf("follow=%v: %v, want NOT_FOUND UNKNOWN_TOPIC", follow, err)
		}
		if d := apierr.Detail(err); d.Topic != "no-such-topic" {
			t.Fatalf("detail topic %q", d.Topic)
		}
	}
	if _, err := ls.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "a", Messages: []*logstorepb.Message{msg(1)}}}}); err != nil {
		t.Fatal(err)
	}
	st, err := ls.ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: "a", FromOffset: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("read past the end of a written topic: %v, want io.EOF", err)
	}
}
