package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
)

// The bare reference: one gRPC Deliver stream on loopback in this process,
// no LogPlayer and no target SDK, carrying one Batch of a 1 KB delivery
// every bareGap, timed from just before Send to the server's Recv. It is
// the floor of the LogPlayer delay on this machine (the same hops through
// grpc-go's writer goroutine, the kernel and the server's reader, after the
// same kind of idle gap), as bare hashicorp/raft is for the LogStore.
const (
	bareMessages = 400
	bareGap      = 5 * time.Millisecond
)

// Bare is the reference measurement printed under the table.
type Bare struct {
	Gap   time.Duration
	Delay Stats
}

// bareServer records, for each Batch, now - Batch.dispatched_unix_nano.
type bareServer struct {
	targetpb.UnimplementedTargetServer
	delays chan time.Duration // capacity bareMessages
}

func (s *bareServer) Deliver(ss grpc.BidiStreamingServer[targetpb.DeliverRequest, targetpb.DeliverResponse]) error {
	for {
		req, err := ss.Recv()
		if err != nil {
			return err
		}
		if b := req.GetBatch(); b != nil {
			select {
			case s.delays <- time.Duration(time.Now().UnixNano() - b.DispatchedUnixNano):
			default:
			}
		}
	}
}

// measureBare runs the bare reference.
func measureBare(ctx context.Context) (Bare, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Bare{}, err
	}
	srv := &bareServer{delays: make(chan time.Duration, bareMessages)}
	gs := grpc.NewServer()
	targetpb.RegisterTargetServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return Bare{}, err
	}
	defer cc.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := targetpb.NewTargetClient(cc).Deliver(sctx)
	if err != nil {
		return Bare{}, err
	}
	value := make([]byte, kvBytes)
	var d []time.Duration
	for i := range bareMessages {
		select {
		case <-ctx.Done():
			return Bare{}, ctx.Err()
		case <-time.After(bareGap):
		}
		req := &targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Batch{Batch: &targetpb.Batch{
			Deliveries: []*targetpb.Delivery{{Lsn: uint64(i + 1), Slices: []*logstorepb.TxnSlice{
				{Topic: "bare", Messages: []*logstorepb.Message{{Value: value}}}}}},
			DispatchedUnixNano: time.Now().UnixNano(),
		}}}
		if err := stream.Send(req); err != nil {
			return Bare{}, fmt.Errorf("bare stream: %w", err)
		}
		select {
		case x := <-srv.delays:
			d = append(d, x)
		case <-time.After(readyTimeout):
			return Bare{}, fmt.Errorf("bare stream: message %d not received", i+1)
		}
	}
	return Bare{Gap: bareGap, Delay: statsOf(d)}, nil
}
