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
// every bareGap while a row is measured, timed from just before Send to the
// server's Recv. It takes the same hops as a delivery (grpc-go's writer
// goroutine, the kernel, the server's reader) on the same loaded machine,
// after the same kind of idle gap: what any gRPC delivery would pay there,
// as bare hashicorp/raft is for the LogStore.
const bareGap = 5 * time.Millisecond

// bareSamplesMax bounds the samples one row keeps (a 10-minute row).
const bareSamplesMax = 120_000

// bareStream is a running bare reference stream.
type bareStream struct {
	gs     *grpc.Server
	cc     *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{} // closed when the sending goroutine ended
	srv    *bareServer
	err    error // of the sending goroutine; read after done
}

// bareServer records, for each Batch, now - Batch.dispatched_unix_nano.
type bareServer struct {
	targetpb.UnimplementedTargetServer
	delays samples
}

func (s *bareServer) Deliver(ss grpc.BidiStreamingServer[targetpb.DeliverRequest, targetpb.DeliverResponse]) error {
	for {
		req, err := ss.Recv()
		if err != nil {
			return err
		}
		if b := req.GetBatch(); b != nil && s.delays.len() < bareSamplesMax {
			s.delays.add(time.Duration(time.Now().UnixNano() - b.DispatchedUnixNano))
		}
	}
}

// startBare starts the bare reference stream; stop ends it.
func startBare(ctx context.Context) (*bareStream, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &bareStream{gs: grpc.NewServer(), srv: &bareServer{}, done: make(chan struct{})}
	targetpb.RegisterTargetServer(b.gs, b.srv)
	go func() { _ = b.gs.Serve(lis) }()
	b.cc, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.gs.Stop()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	stream, err := targetpb.NewTargetClient(b.cc).Deliver(sctx)
	if err != nil {
		cancel()
		b.cc.Close()
		b.gs.Stop()
		return nil, err
	}
	go func() {
		defer close(b.done)
		value := make([]byte, kvBytes)
		t := time.NewTicker(bareGap)
		defer t.Stop()
		for lsn := uint64(1); ; lsn++ {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			req := &targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Batch{Batch: &targetpb.Batch{
				Deliveries: []*targetpb.Delivery{{Lsn: lsn, Slices: []*logstorepb.TxnSlice{
					{Topic: "bare", Messages: []*logstorepb.Message{{Value: value}}}}}},
				DispatchedUnixNano: time.Now().UnixNano(),
			}}}
			if err := stream.Send(req); err != nil {
				if sctx.Err() == nil {
					b.err = fmt.Errorf("bare stream: %w", err)
				}
				return
			}
		}
	}()
	return b, nil
}

// stop ends the stream and returns its delays.
func (b *bareStream) stop() (Stats, error) {
	b.cancel()
	<-b.done
	b.cc.Close()
	b.gs.Stop()
	return b.srv.delays.stats(), b.err
}
