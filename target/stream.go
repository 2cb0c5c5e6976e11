package target

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// stream is one Deliver call. Its handler goroutine owns Send; its receiver
// goroutine owns Recv; the applier decides when it ends.
type stream struct {
	id    uint64
	hello *targetpb.Hello // set by the handler before the stream is queued

	acked     atomic.Uint64 // highest applied LSN to report; written by the applier
	ackSignal chan struct{} // capacity 1: "acked changed", coalesced (acks are cumulative)

	endOnce sync.Once
	ended   chan struct{} // closed by end
	endErr  error         // final status of the call (nil: OK); written before ended closes
}

func newStream(id uint64) *stream {
	return &stream{id: id, ackSignal: make(chan struct{}, 1), ended: make(chan struct{})}
}

// end fixes the stream's final status; the first call wins.
func (st *stream) end(err error) {
	st.endOnce.Do(func() {
		st.endErr = err
		close(st.ended)
	})
}

func (st *stream) isEnded() bool {
	select {
	case <-st.ended:
		return true
	default:
		return false
	}
}

// ack publishes lsn as durably applied; the handler sends it.
func (st *stream) ack(lsn types.LSN) {
	st.acked.Store(uint64(lsn))
	select {
	case st.ackSignal <- struct{}{}:
	default:
	}
}

// item is one unit of work for the applier: a Hello, a batch, or the end of
// a stream's requests (eof).
type item struct {
	st    *stream
	hello *targetpb.Hello
	reply chan helloResult // capacity 1, for hello items

	batch *targetpb.Batch
	size  int // encoded bytes of batch
	eof   bool

	run func() // runs alone on the applier goroutine (Restore: target/snapshot.go)
}

type helloResult struct {
	ack *targetpb.HelloAck
	err *refusal
}

// Deliver implements targetpb.TargetServer: the handshake, then acks until
// the stream ends. See the package doc for the protocol.
func (s *Server) Deliver(ss grpc.BidiStreamingServer[targetpb.DeliverRequest, targetpb.DeliverResponse]) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return errShuttingDown.status()
	}
	s.mu.streamID++
	st := newStream(s.mu.streamID)
	s.streams.Add(2) // this handler and its receiver
	s.mu.Unlock()
	defer s.streams.Done()

	helloCh := make(chan *targetpb.Hello, 1) // the receiver's first message
	accepted := make(chan struct{})          // closed when the handshake succeeded
	go s.receive(ss, st, helloCh, accepted)

	ack, r := s.handshake(ss, st, helloCh)
	if r != nil {
		s.countRefusal(st, r)
		err := r.status()
		st.end(err)
		return err
	}
	if err := ss.Send(&targetpb.DeliverResponse{Kind: &targetpb.DeliverResponse_HelloAck{HelloAck: ack}}); err != nil {
		st.end(err)
		return err
	}
	close(accepted)
	s.log.Info("stream open", "player", st.hello.PlayerId, "epoch", st.hello.Epoch, "session", st.hello.Session, "lsn", ack.AppliedLsn)

	var sent types.LSN
	sendAck := func() error {
		lsn := types.LSN(st.acked.Load())
		if lsn <= sent {
			return nil
		}
		sent = lsn
		return ss.Send(&targetpb.DeliverResponse{Kind: &targetpb.DeliverResponse_Ack{Ack: &targetpb.Ack{AppliedLsn: uint64(lsn)}}})
	}
	for {
		select {
		case <-st.ackSignal:
			if err := sendAck(); err != nil {
				st.end(err)
				return err
			}
		case <-st.ended:
			_ = sendAck() // what was applied before the end; the status follows
			s.log.Info("stream closed", "epoch", st.hello.Epoch, "session", st.hello.Session, "err", st.endErr)
			return st.endErr
		case <-ss.Context().Done():
			st.end(status.FromContextError(ss.Context().Err()).Err())
			return st.endErr
		case <-s.quit:
			_ = sendAck()
			st.end(errShuttingDown.status())
			return st.endErr
		}
	}
}

// handshake waits for the Hello, checks it and has the applier accept it.
func (s *Server) handshake(ss grpc.BidiStreamingServer[targetpb.DeliverRequest, targetpb.DeliverResponse],
	st *stream, helloCh <-chan *targetpb.Hello) (*targetpb.HelloAck, *refusal) {
	timer := time.NewTimer(s.cfg.HelloTimeout)
	defer timer.Stop()
	var h *targetpb.Hello
	select {
	case h = <-helloCh:
	case <-st.ended: // the receiver failed before a Hello
		if r := asRefusal(st.endErr); r != nil {
			return nil, r
		}
		return nil, refuse("", logstorepb.ErrorCode_INVALID_ARGUMENT, nil, "stream ended before Hello: %v", st.endErr)
	case <-timer.C: // nothing was delivered: applied NO, not TIMEOUT's default MAYBE
		return nil, refuse(reasonProtocol, logstorepb.ErrorCode_TIMEOUT, beforeHello(), "no Hello within %v", s.cfg.HelloTimeout)
	case <-ss.Context().Done():
		return nil, refuse("", logstorepb.ErrorCode_TIMEOUT, beforeHello(), "stream ended before Hello: %v", ss.Context().Err())
	case <-s.quit:
		return nil, errShuttingDown
	}
	st.hello = h
	if r := s.checkHello(h); r != nil {
		return nil, r
	}
	it := &item{st: st, hello: h, reply: make(chan helloResult, 1)}
	select {
	case s.queue <- it:
	case <-ss.Context().Done():
		return nil, refuse("", logstorepb.ErrorCode_TIMEOUT, nil, "stream ended during handshake")
	case <-s.quit:
		return nil, errShuttingDown
	}
	select {
	case res := <-it.reply:
		return res.ack, res.err
	case <-s.quit:
		return nil, errShuttingDown
	}
}

// checkHello checks what a Hello says on its own (no State needed).
func (s *Server) checkHello(h *targetpb.Hello) *refusal {
	if h.ProtocolVersion != targetpb.ProtocolVersion_PROTOCOL_VERSION_1 {
		return refuse(reasonProtocolVersion, logstorepb.ErrorCode_UNSUPPORTED_PROTOCOL,
			&logstorepb.ErrorDetail{Limit: uint64(targetpb.ProtocolVersion_PROTOCOL_VERSION_1)},
			"unsupported protocol version %d (%s); this target speaks %d (%s) only",
			int32(h.ProtocolVersion), h.ProtocolVersion, int32(targetpb.ProtocolVersion_PROTOCOL_VERSION_1),
			targetpb.ProtocolVersion_PROTOCOL_VERSION_1)
	}
	if types.TargetID(h.TargetId) != s.cfg.TargetID {
		return refuse(reasonWrongTarget, logstorepb.ErrorCode_WRONG_TARGET, nil,
			"hello for target %q reached target %q", h.TargetId, s.cfg.TargetID)
	}
	if h.Epoch == 0 {
		return refuse(reasonProtocol, logstorepb.ErrorCode_INVALID_ARGUMENT, nil,
			"hello with epoch 0; epochs start at 1 (LogStore NextEpoch)")
	}
	return nil
}

// receive is the receiver goroutine of st: it reads the Hello, then feeds the
// stream's batches to the applier queue until the stream ends.
func (s *Server) receive(ss grpc.BidiStreamingServer[targetpb.DeliverRequest, targetpb.DeliverResponse],
	st *stream, helloCh chan<- *targetpb.Hello, accepted <-chan struct{}) {
	defer s.streams.Done()
	req, err := ss.Recv()
	if err != nil {
		st.end(err)
		return
	}
	h := req.GetHello()
	if h == nil {
		st.end(refuse(reasonProtocol, logstorepb.ErrorCode_INVALID_ARGUMENT, nil, "first request is not a Hello"))
		return
	}
	helloCh <- h
	select {
	case <-accepted:
	case <-st.ended:
		return
	}
	for {
		req, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			s.push(st, &item{st: st, eof: true})
			return
		}
		if err != nil {
			st.end(err)
			return
		}
		b := req.GetBatch()
		if b == nil {
			r := refuse(reasonProtocol, logstorepb.ErrorCode_INVALID_ARGUMENT, nil, "request after Hello is not a Batch")
			s.countRefusal(st, r)
			st.end(r.status())
			return
		}
		if !s.push(st, &item{st: st, batch: b, size: proto.Size(b)}) {
			return
		}
	}
}

// push queues it for the applier, blocking while the queue is full by count
// or bytes (gRPC flow control then pushes back on the LogPlayer). It reports
// false when the stream or the Server ended first.
func (s *Server) push(st *stream, it *item) bool {
	if !s.queued.reserve(it.size, st.ended, s.quit) {
		return false
	}
	select {
	case s.queue <- it:
		return true
	case <-st.ended:
	case <-s.quit:
	}
	s.queued.release(it.size)
	return false
}
