package logplayer

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/dispatcher"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
)

// fakeStream is the client side of a Deliver stream: Send records batches,
// Recv returns what the test feeds into acks (and io.EOF once it is closed).
type fakeStream struct {
	grpc.ClientStream
	mu   sync.Mutex
	sent []*targetpb.Batch
	acks chan *targetpb.DeliverResponse
}

func newFakeStream() *fakeStream { return &fakeStream{acks: make(chan *targetpb.DeliverResponse, 16)} }

func (s *fakeStream) Send(req *targetpb.DeliverRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, req.GetBatch())
	return nil
}

func (s *fakeStream) Recv() (*targetpb.DeliverResponse, error) {
	r, ok := <-s.acks
	if !ok {
		return nil, io.EOF
	}
	return r, nil
}

func (s *fakeStream) batches() []*targetpb.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*targetpb.Batch(nil), s.sent...)
}

func ackOf(lsn uint64) *targetpb.DeliverResponse {
	return &targetpb.DeliverResponse{Kind: &targetpb.DeliverResponse_Ack{Ack: &targetpb.Ack{AppliedLsn: lsn}}}
}

// testRunner is a runner wired to a dispatcher with one target "x" on
// topic "t", outside any Player goroutine.
func testRunner(t *testing.T, tweak func(*Config)) (*runner, *dispatcher.Dispatcher) {
	t.Helper()
	cfg := Config{LogStore: []string{"127.0.0.1:1"}, Registerer: prometheus.NewRegistry(), Logger: testLogger(t)}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	d := dispatcher.New(dispatcher.Config{}, 0)
	if err := d.AddTarget("x", []string{"t"}); err != nil {
		t.Fatal(err)
	}
	p.d.Store(d)
	r := &runner{p: p, cfg: TargetConfig{ID: "x", Topics: []string{"t"}}, m: p.m.forTarget("x"),
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	return r, d
}

func txnOn(lsn uint64, topic string) *logstorepb.Transaction {
	return &logstorepb.Transaction{Lsn: lsn, Slices: []*logstorepb.TxnSlice{{Topic: topic, FirstOffset: lsn - 1,
		Messages: []*logstorepb.Message{{Value: []byte("v")}}}}}
}

// An ack that arrives on the stream of an older term changes nothing in the
// dispatcher and ends that stream.
func TestAckFromOlderStreamIgnored(t *testing.T) {
	r, d := testRunner(t, nil)
	old, err := d.Return("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Return("x", 0); err != nil { // the target came back again: a newer stream
		t.Fatal(err)
	}
	d.Dispatch(txnOn(1, "t"), 1)
	stream := newFakeStream()
	ctx, cancel := context.WithCancelCause(context.Background())
	c := newConn(old.Term, stream, cancel)
	stream.acks <- ackOf(1)
	var acked atomic.Bool
	r.receive(c, d, &acked)
	if st, _ := d.Stats("x"); st.LastAck != 0 {
		t.Errorf("last ack %d after an older stream's ack, want 0", st.LastAck)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, dispatcher.ErrStaleTerm) {
		t.Errorf("older stream ended with %v, want ErrStaleTerm", cause)
	}
}

// A target that acks what it was never sent has its stream ended (resync)
// and is counted.
func TestBogusAckEndsStream(t *testing.T) {
	r, d := testRunner(t, nil)
	rec, err := d.Return("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	stream := newFakeStream()
	ctx, cancel := context.WithCancelCause(context.Background())
	c := newConn(rec.Term, stream, cancel)
	stream.acks <- ackOf(5)
	var acked atomic.Bool
	r.receive(c, d, &acked)
	if cause := context.Cause(ctx); !errors.Is(cause, dispatcher.ErrBogusAck) {
		t.Fatalf("cause %v, want ErrBogusAck", cause)
	}
	if got := testmetric.Value(t, r.p.cfg.Registerer.(prometheus.Gatherer), "logplayer_target_bogus_acks_total", nil); got != 1 {
		t.Errorf("bogus acks = %v", got)
	}
	// The same for a message that is not an ack, and for a stream the
	// target ended.
	for _, resp := range []*targetpb.DeliverResponse{{Kind: &targetpb.DeliverResponse_HelloAck{}}, nil} {
		stream := newFakeStream()
		ctx, cancel := context.WithCancelCause(context.Background())
		if resp != nil {
			stream.acks <- resp
		} else {
			close(stream.acks)
		}
		r.receive(newConn(rec.Term, stream, cancel), d, &acked)
		if cause := context.Cause(ctx); !errors.Is(cause, errProtocol) && !errors.Is(cause, errTargetEnded) {
			t.Errorf("cause %v", cause)
		}
	}
}

// The sender never has more than WindowBatches batches (or WindowBytes) in
// flight; cumulative acks release the window and sending resumes, in LSN
// order, and the receiver observes delivery durations.
func TestSenderWindow(t *testing.T) {
	r, d := testRunner(t, func(c *Config) { c.WindowBatches = 3; c.MaxBatchCount = 2 })
	rec, err := d.Return("x", 0)
	if err != nil || !rec.Empty {
		t.Fatalf("return %+v %v", rec, err)
	}
	for lsn := uint64(1); lsn <= 20; lsn++ {
		d.Dispatch(txnOn(lsn, "t"), int64(lsn))
	}
	stream := newFakeStream()
	ctx, cancel := context.WithCancelCause(context.Background())
	c := newConn(rec.Term, stream, cancel)
	var wg sync.WaitGroup
	wg.Add(2)
	var sendErr error
	go func() { defer wg.Done(); sendErr = r.send(ctx, c, d) }()
	var acked atomic.Bool
	go func() { defer wg.Done(); r.receive(c, d, &acked) }()
	signal(r.wake)

	// The window counts a batch before its Send returns: wait for both.
	testwait.For(t, testwait.Max, "a full window, sent", func() bool {
		n, _ := c.window()
		return n == 3 && len(stream.batches()) >= 3
	})
	if n := len(stream.batches()); n != 3 {
		t.Fatalf("%d batches sent with a window of 3", n)
	}
	stream.acks <- ackOf(4) // releases the first two batches (LSNs 1-2, 3-4)
	testwait.For(t, testwait.Max, "the window refilled", func() bool { return len(stream.batches()) == 5 })
	stream.acks <- ackOf(10) // the window refills with three more (LSNs 11-16)
	testwait.For(t, testwait.Max, "the window refilled again", func() bool { return len(stream.batches()) == 8 })
	stream.acks <- ackOf(16)
	testwait.For(t, testwait.Max, "everything sent", func() bool {
		b := stream.batches()
		return len(b) == 10 && b[9].Deliveries[1].Lsn == 20
	})
	stream.acks <- ackOf(20)
	testwait.For(t, testwait.Max, "an empty window", func() bool { n, _ := c.window(); return n == 0 })
	var next uint64 = 1
	for _, b := range stream.batches() {
		if len(b.Deliveries) > 2 || b.DispatchedUnixNano != int64(b.Deliveries[0].Lsn) {
			t.Errorf("batch %+v", b)
		}
		for _, dl := range b.Deliveries {
			if dl.Lsn != next {
				t.Fatalf("sent lsn %d, want %d", dl.Lsn, next)
			}
			next++
		}
	}
	if st, _ := d.Stats("x"); st.LastAck != 20 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
	if got := testmetric.Value(t, r.p.cfg.Registerer.(prometheus.Gatherer), "logplayer_delivery_duration_seconds", nil); got != 20 {
		t.Errorf("%v delivery durations observed, want 20", got)
	}
	cancel(errSlow)
	close(stream.acks)
	wg.Wait()
	if !errors.Is(sendErr, errSlow) {
		t.Errorf("sender ended with %v", sendErr)
	}
}

func TestClassify(t *testing.T) {
	refusal := func(c codes.Code, ec logstorepb.ErrorCode) error {
		st, _ := status.New(c, "x").WithDetails(&logstorepb.ErrorDetail{Code: ec})
		return st.Err()
	}
	cases := []struct {
		err  error
		want failure
	}{
		{refusal(codes.FailedPrecondition, logstorepb.ErrorCode_STALE_EPOCH), failFenced},
		{refusal(codes.DataLoss, logstorepb.ErrorCode_APPLY_REJECTED), failPermanent},
		{refusal(codes.InvalidArgument, logstorepb.ErrorCode_WRONG_TARGET), failPermanent},
		{refusal(codes.InvalidArgument, logstorepb.ErrorCode_UNSUPPORTED_PROTOCOL), failPermanent},
		{refusal(codes.Aborted, logstorepb.ErrorCode_CONTINUITY), failTransient},
		{refusal(codes.Aborted, logstorepb.ErrorCode_SUPERSEDED), failTransient},
		{refusal(codes.Unavailable, logstorepb.ErrorCode_SHUTTING_DOWN), failTransient},
		{status.Error(codes.DataLoss, "no detail"), failPermanent},
		{status.Error(codes.Unavailable, "down"), failTransient},
		{errSlow, failSlow},
		{errors.Join(errBlocked, errors.New("below retention")), failPermanent},
		{errHelloTimeout, failTransient},
		// Every refusal about the request itself (apierr.Final) is
		// answered the same on the next session: retry it slowly and
		// show the target blocked, whichever code says so.
		{refusal(codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT), failPermanent},
		{refusal(codes.PermissionDenied, logstorepb.ErrorCode_PERMISSION_DENIED), failPermanent},
		{refusal(codes.Unauthenticated, logstorepb.ErrorCode_UNAUTHENTICATED), failPermanent},
		{status.Error(codes.Unimplemented, "unknown service logplayer.target.Target"), failPermanent},
		{refusal(codes.Internal, logstorepb.ErrorCode_INTERNAL), failTransient},
		{refusal(codes.DeadlineExceeded, logstorepb.ErrorCode_TIMEOUT), failTransient},
		{status.Error(codes.DeadlineExceeded, "slow"), failTransient},
		{errors.New("dial tcp: connection refused"), failTransient},
	}
	for _, tc := range cases {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
