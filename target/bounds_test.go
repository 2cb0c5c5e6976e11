package target_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// A stream sending more than the queue's byte bound while the applier is
// busy is back-pressured (its receiver stops reading) once the queue holds
// the bound, not buffered up to the queue's batch count.
func TestQueueBoundedByBytes(t *testing.T) {
	const (
		batchValue = 16 << 10
		queueMax   = 64 << 10
		batches    = 20 // 320 KiB: five times the bound, well under the 64-batch count bound
	)
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	var first sync.Once
	store := &targettest.MemStore{}
	store.BeforeApply = func(ds []*targetpb.Delivery, _ target.State) error {
		if len(ds) > 0 {
			first.Do(func() {
				blocked <- struct{}{}
				<-release
			})
		}
		return nil
	}
	e := newEnv(t, store, func(c *target.Config) { c.MaxQueueBytes = queueMax })
	var unblock sync.Once
	let := func() { unblock.Do(func() { close(release) }) }
	t.Cleanup(let) // before the Server's Close, which waits for the blocked Apply
	s, _ := e.open(1, 1)
	log := targettest.NewLog()
	payload := strings.Repeat("x", batchValue)
	var all [][]*targetpb.Delivery
	for range batches + 1 {
		all = append(all, []*targetpb.Delivery{log.Txn(targettest.Part{Topic: "a", Values: val(payload)})})
	}
	size := proto.Size(&targetpb.Batch{Deliveries: all[1]})
	if err := s.Send(all[0]...); err != nil { // applied alone; blocks the applier
		t.Fatal(err)
	}
	<-blocked
	sent := make(chan error, 1) // the sender may block on flow control: its own goroutine
	go func() {
		for _, b := range all[1:] {
			if err := s.Send(b...); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	testwait.ForErr(t, testwait.Max, "the receiver waiting for room in the queue", func() error {
		if n := target.QueueLen(e.srv); n*size > queueMax {
			t.Fatalf("%d batches (%d bytes) queued, beyond the %d byte bound", n, n*size, queueMax)
		}
		if target.QueueWaiting(e.srv) == 0 {
			return fmt.Errorf("%d batches queued, no receiver waiting", target.QueueLen(e.srv))
		}
		return nil
	})
	if b := target.QueueBytes(e.srv); b > queueMax || b < queueMax-size {
		t.Fatalf("queue holds %d bytes while a receiver waits, want the bound %d filled to within one batch (%d)", b, queueMax, size)
	}
	let()
	if err := s.WaitAck(ctxT(t), types.LSN(batches+1)); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if b := target.QueueBytes(e.srv); b != 0 {
		t.Fatalf("queue bytes %d after everything was applied, want 0", b)
	}
}

// sendWatch signals when a Deliver handler starts sending an Ack.
func sendWatch(sending chan<- struct{}) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &watchedStream{ServerStream: ss, sending: sending})
	}
}

type watchedStream struct {
	grpc.ServerStream
	sending chan<- struct{}
}

func (w *watchedStream) SendMsg(m any) error {
	if r, ok := m.(*targetpb.DeliverResponse); ok && r.GetAck() != nil {
		select {
		case w.sending <- struct{}{}:
		default:
		}
	}
	return w.ServerStream.SendMsg(m)
}

// A caller that stops reading (here: never reads its HelloAck, larger than
// the flow-control windows) leaves the Deliver handler blocked in Send (gRPC
// lets one message past its write quota: the HelloAck; the Ack that follows
// blocks); Close still returns, after its bound.
func TestCloseReturnsWithHandlerBlockedInSend(t *testing.T) {
	// A State with enough topics that the HelloAck (about 1 MiB) cannot fit
	// in the caller's 64 KiB windows.
	st := target.State{Epoch: 1, Topics: map[string]types.Offset{}}
	for i := range 20000 {
		st.Topics[fmt.Sprintf("topic-%040d", i)] = 1
	}
	store := &targettest.MemStore{}
	if err := store.Apply(nil, st); err != nil {
		t.Fatal(err)
	}
	srv, err := target.NewServer(target.Config{TargetID: "t1", Store: store, CloseTimeout: 100e6})
	if err != nil {
		t.Fatal(err)
	}
	sending := make(chan struct{}, 1)
	gs := grpc.NewServer(append(target.ServerOptions(), grpc.ChainStreamInterceptor(sendWatch(sending)))...)
	srv.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := targetpb.NewTargetClient(cc).Deliver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Hello{Hello: targettest.Hello("t1", 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	d := &targetpb.Delivery{Lsn: 1, Slices: []*logstorepb.TxnSlice{{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("1")}}}}}
	if err := stream.Send(&targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Batch{Batch: &targetpb.Batch{Deliveries: []*targetpb.Delivery{d}}}}); err != nil {
		t.Fatal(err)
	}
	<-sending // the handler is in Send of the Ack; nobody reads
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	testwait.For(t, testwait.Max, "Close to return with a handler blocked in Send", func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
}
