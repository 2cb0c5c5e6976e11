package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// fakeStore answers Append and AppendBatch: a request for topic "t-N"
// gets LSN N, topic "bad" gets INVALID_TOPIC, so every answer shows which
// request it belongs to. It records the calls it served.
type fakeStore struct {
	logstorepb.UnimplementedLogStoreServer
	mu      sync.Mutex
	unary   int
	batches []int // requests per AppendBatch call
	short   bool  // answer one result too few
}

func answer(req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	topic := req.Slices[0].Topic
	if topic == "bad" {
		return nil, apierr.New(logstorepb.ErrorCode_INVALID_TOPIC, "bad topic", func(d *logstorepb.ErrorDetail) { d.Topic = topic })
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(topic, "t-"), 10, 64)
	if err != nil {
		return nil, status.Error(codes.Internal, "test topic not t-N")
	}
	return &logstorepb.AppendResponse{Lsn: n}, nil
}

func (f *fakeStore) Append(_ context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	f.mu.Lock()
	f.unary++
	f.mu.Unlock()
	return answer(req)
}

func (f *fakeStore) AppendBatch(_ context.Context, req *logstorepb.AppendBatchRequest) (*logstorepb.AppendBatchResponse, error) {
	f.mu.Lock()
	f.batches = append(f.batches, len(req.Requests))
	short := f.short
	f.mu.Unlock()
	out := &logstorepb.AppendBatchResponse{}
	for _, r := range req.Requests {
		resp, err := answer(r)
		if err != nil {
			out.Results = append(out.Results, &logstorepb.AppendResult{Error: apierr.Encode(err)})
		} else {
			out.Results = append(out.Results, &logstorepb.AppendResult{Response: resp})
		}
	}
	if short {
		out.Results = out.Results[1:]
	}
	return out, nil
}

func (f *fakeStore) calls() (int, []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unary, append([]int(nil), f.batches...)
}

// noBatchStore is a node of an older release: no AppendBatch.
type noBatchStore struct {
	logstorepb.UnimplementedLogStoreServer
	fake *fakeStore
}

func (s noBatchStore) Append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	return s.fake.Append(ctx, req)
}

func serveFake(t *testing.T, srv logstorepb.LogStoreServer) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	logstorepb.RegisterLogStoreServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func req(topic string) *logstorepb.AppendRequest {
	return &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: topic, Messages: []*logstorepb.Message{{Value: []byte("v")}}}}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// queueHeld makes n appends queue on b while no flush runs (a flush is
// marked scheduled but not started), and returns their results channel.
func queueHeld(t *testing.T, ctx context.Context, b *appendBatcher, topics []string) <-chan string {
	t.Helper()
	b.mu.Lock()
	b.flushing = true
	b.mu.Unlock()
	out := make(chan string, len(topics))
	for _, topic := range topics {
		go func() {
			resp, err := b.append(ctx, req(topic))
			if err != nil {
				out <- fmt.Sprintf("%s: %v/%v", topic, status.Code(err), apierr.CodeOf(err))
				return
			}
			out <- fmt.Sprintf("%s: lsn %d", topic, resp.Lsn)
		}()
	}
	testwait.For(t, 20*time.Second, "every append queued", func() bool { return b.queued() == len(topics) })
	return out
}

func collect(t *testing.T, ch <-chan string, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for range n {
		select {
		case s := <-ch:
			got[s] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d answers", len(got), n)
		}
	}
	return got
}

// TestBatcherCoalescesAndAnswersEachRequest: appends queued together go
// in one AppendBatch call, and each caller gets its own request's answer,
// errors included, exactly as a plain Append would give it.
func TestBatcherCoalescesAndAnswersEachRequest(t *testing.T) {
	f := &fakeStore{}
	b := newAppendBatcher(serveFake(t, f), DefaultMaxBatchBytes)
	var topics []string
	for i := 1; i <= 50; i++ {
		topics = append(topics, fmt.Sprintf("t-%d", i))
	}
	topics = append(topics, "bad")
	out := queueHeld(t, testCtx(t), b, topics)
	b.flush()
	got := collect(t, out, len(topics))
	for i := 1; i <= 50; i++ {
		if want := fmt.Sprintf("t-%d: lsn %d", i, i); !got[want] {
			t.Fatalf("missing %q in %v", want, got)
		}
	}
	if want := "bad: InvalidArgument/INVALID_TOPIC"; !got[want] {
		t.Fatalf("missing %q in %v", want, got)
	}
	unary, batches := f.calls()
	if unary != 0 || len(batches) != 1 || batches[0] != 51 {
		t.Fatalf("calls: %d unary, batches %v; want one batch of 51", unary, batches)
	}
	// The plain call gives the same error for the bad request.
	_, err := logstorepb.NewLogStoreClient(b.cc).Append(testCtx(t), req("bad"))
	if batchErr := decodeResult(&logstorepb.AppendResult{Error: apierr.Encode(err)}).err; status.Code(batchErr) != status.Code(err) ||
		status.Convert(batchErr).Message() != status.Convert(err).Message() || apierr.Detail(batchErr).GetTopic() != "bad" {
		t.Fatalf("batch error %v differs from plain error %v", batchErr, err)
	}
}

// TestBatcherBounds: a batch holds at most maxBytes of requests (the rest
// go in the next calls), and a request larger than that goes alone as a
// plain Append.
func TestBatcherBounds(t *testing.T) {
	f := &fakeStore{}
	one := proto.Size(req("t-10"))
	b := newAppendBatcher(serveFake(t, f), 3*one)
	var topics []string
	for i := 10; i < 20; i++ {
		topics = append(topics, fmt.Sprintf("t-%d", i))
	}
	out := queueHeld(t, testCtx(t), b, topics)
	b.flush()
	collect(t, out, len(topics))
	_, batches := f.calls()
	total := 0
	for _, n := range batches {
		if n > 3 {
			t.Fatalf("batch of %d requests over a 3-request byte bound: %v", n, batches)
		}
		total += n
	}
	if total != 10 {
		t.Fatalf("batches %v carry %d requests, want 10", batches, total)
	}
	big := req("t-7")
	big.Slices[0].Messages[0].Value = make([]byte, 4*one)
	if resp, err := b.append(testCtx(t), big); err != nil || resp.Lsn != 7 {
		t.Fatalf("oversize request: %v %v", resp, err)
	}
	if unary, _ := f.calls(); unary != 1 {
		t.Fatalf("oversize request not sent as a plain Append (%d plain calls)", unary)
	}
}

// TestBatcherFallsBackWithoutAppendBatch: against a node with no
// AppendBatch every append still succeeds, as plain Appends.
func TestBatcherFallsBackWithoutAppendBatch(t *testing.T) {
	f := &fakeStore{}
	b := newAppendBatcher(serveFake(t, noBatchStore{fake: f}), DefaultMaxBatchBytes)
	for i := 1; i <= 3; i++ {
		resp, err := b.append(testCtx(t), req(fmt.Sprintf("t-%d", i)))
		if err != nil || resp.Lsn != uint64(i) {
			t.Fatalf("append %d: %v %v", i, resp, err)
		}
	}
	if unary, _ := f.calls(); unary != 3 || !b.noBatch.Load() {
		t.Fatalf("%d plain calls, noBatch %v; want 3, true", unary, b.noBatch.Load())
	}
}

// TestBatcherMalformedAnswer: a batch answer with the wrong number of
// results fails every request of it as INTERNAL (never mis-assigns).
func TestBatcherMalformedAnswer(t *testing.T) {
	f := &fakeStore{short: true}
	b := newAppendBatcher(serveFake(t, f), DefaultMaxBatchBytes)
	out := queueHeld(t, testCtx(t), b, []string{"t-1", "t-2"})
	b.flush()
	got := collect(t, out, 2)
	for _, want := range []string{"t-1: Internal/INTERNAL", "t-2: Internal/INTERNAL"} {
		if !got[want] {
			t.Fatalf("missing %q in %v", want, got)
		}
	}
}

// TestBatcherCallerGone: an append whose caller gave up before the flush
// is never sent; the caller sees its context's error as a status.
func TestBatcherCallerGone(t *testing.T) {
	f := &fakeStore{}
	b := newAppendBatcher(serveFake(t, f), DefaultMaxBatchBytes)
	ctx, cancel := context.WithCancel(testCtx(t))
	out := queueHeld(t, ctx, b, []string{"t-1"})
	cancel()
	if got := collect(t, out, 1); !got["t-1: Canceled/ERROR_CODE_UNSPECIFIED"] {
		t.Fatalf("cancelled caller got %v", got)
	}
	b.flush()
	if unary, batches := f.calls(); unary != 0 || len(batches) != 0 {
		t.Fatalf("a cancelled append was sent: %d plain, batches %v", unary, batches)
	}
}

func TestMaxBatchRequestsMatchesServer(t *testing.T) {
	if maxBatchRequests != logstore.MaxAppendBatchRequests {
		t.Fatalf("client batches up to %d requests, the server takes %d", maxBatchRequests, logstore.MaxAppendBatchRequests)
	}
}

func TestDecodeResultRejectsEmptyAndOK(t *testing.T) {
	for name, r := range map[string]*logstorepb.AppendResult{
		"empty":   {},
		"code OK": {Error: &logstorepb.AppendError{GrpcCode: 0, Message: "x"}},
	} {
		if err := decodeResult(r).err; status.Code(err) != codes.Internal {
			t.Errorf("%s: %v, want INTERNAL", name, err)
		}
	}
	plain := decodeResult(&logstorepb.AppendResult{Error: &logstorepb.AppendError{GrpcCode: uint32(codes.Unavailable), Message: "gone"}}).err
	if status.Code(plain) != codes.Unavailable || errors.Is(plain, errNoBatchRPC) {
		t.Fatalf("detail-less error: %v", plain)
	}
}
