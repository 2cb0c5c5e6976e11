package targettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// Hello returns a Hello for protocol version 1.
func Hello(target types.TargetID, epoch types.Epoch, session types.Session) *targetpb.Hello {
	return &targetpb.Hello{
		PlayerId:        "targettest",
		Epoch:           uint64(epoch),
		TargetId:        string(target),
		ProtocolVersion: targetpb.ProtocolVersion_PROTOCOL_VERSION_1,
		Session:         uint64(session),
	}
}

// Sender is the LogPlayer side of one Deliver stream, for tests. Send may be
// called from one goroutine at a time; the other methods from any.
type Sender struct {
	stream grpc.BidiStreamingClient[targetpb.DeliverRequest, targetpb.DeliverResponse]
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		acked   types.LSN
		changed chan struct{} // closed and replaced whenever acked or ended changes
		ended   bool
		err     error // the stream's final error (nil: ended with OK)
	}
}

// Open starts a Deliver stream on cc, sends hello and waits for the HelloAck.
// An error is the target's refusal (a gRPC status) or a transport error. The
// stream lives until Close, or until ctx is done.
func Open(ctx context.Context, cc grpc.ClientConnInterface, hello *targetpb.Hello) (*Sender, *targetpb.HelloAck, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := targetpb.NewTargetClient(cc).Deliver(sctx)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if err := stream.Send(&targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Hello{Hello: hello}}); err != nil {
		_, err = stream.Recv() // the real reason
		cancel()
		return nil, nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	ack := resp.GetHelloAck()
	if ack == nil {
		cancel()
		return nil, nil, fmt.Errorf("targettest: first response is not a HelloAck: %v", resp)
	}
	s := &Sender{stream: stream, cancel: cancel}
	s.mu.acked = types.LSN(ack.AppliedLsn)
	s.mu.changed = make(chan struct{})
	go s.receive()
	return s, ack, nil
}

func (s *Sender) receive() {
	for {
		resp, err := s.stream.Recv()
		s.mu.Lock()
		if err != nil {
			s.mu.ended = true
			if !errors.Is(err, io.EOF) {
				s.mu.err = err
			}
		} else if a := resp.GetAck(); a != nil && types.LSN(a.AppliedLsn) > s.mu.acked {
			s.mu.acked = types.LSN(a.AppliedLsn)
		}
		close(s.mu.changed)
		s.mu.changed = make(chan struct{})
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Send sends ds as one Batch.
func (s *Sender) Send(ds ...*targetpb.Delivery) error {
	return s.stream.Send(&targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Batch{Batch: &targetpb.Batch{Deliveries: ds}}})
}

// SendBatch sends b as is.
func (s *Sender) SendBatch(b *targetpb.Batch) error {
	return s.stream.Send(&targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Batch{Batch: b}})
}

// CloseSend closes the send side: the target applies what it got, acks and
// ends the stream with OK (see Wait).
func (s *Sender) CloseSend() error { return s.stream.CloseSend() }

// Acked is the highest cumulative ack received (the HelloAck's applied LSN
// before any Ack).
func (s *Sender) Acked() types.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.acked
}

// Ended reports whether the stream ended, and its final error (nil: OK).
func (s *Sender) Ended() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.ended, s.mu.err
}

// WaitAck waits until the cumulative ack reaches lsn. It returns the
// stream's error if the stream ends first (a stream that ended with OK
// before lsn is an error too), or ctx's error.
func (s *Sender) WaitAck(ctx context.Context, lsn types.LSN) error {
	for {
		s.mu.Lock()
		acked, ended, err, changed := s.mu.acked, s.mu.ended, s.mu.err, s.mu.changed
		s.mu.Unlock()
		if acked >= lsn {
			return nil
		}
		if ended {
			if err == nil {
				err = fmt.Errorf("targettest: stream ended with OK at ack %d, before lsn %d", acked, lsn)
			}
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("targettest: waiting for ack %d (have %d): %w", lsn, acked, ctx.Err())
		}
	}
}

// Wait waits for the stream to end and returns its final error (nil: OK).
func (s *Sender) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		ended, err, changed := s.mu.ended, s.mu.err, s.mu.changed
		s.mu.Unlock()
		if ended {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("targettest: waiting for the stream to end: %w", ctx.Err())
		}
	}
}

// Close cancels the stream.
func (s *Sender) Close() { s.cancel() }
