package logplayer

import (
	"context"
	"sync"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// conn is one Deliver stream to a target, of one dispatcher term: the
// stream's generation. Its sender (the runner goroutine) owns Send, its
// receiver goroutine owns Recv; everything else they share is the in-flight
// window below.
type conn struct {
	term   types.Term // the dispatcher term Return gave this stream
	stream targetpb.Target_DeliverClient
	// cancel ends the stream and every goroutine of this conn, recording why
	// (context.Cause). The first cause wins.
	cancel context.CancelCauseFunc

	// released is signalled (capacity 1, coalescing) when an ack frees part
	// of the window, so a sender waiting for room re-checks.
	released chan struct{}

	mu struct {
		sync.Mutex
		inflight []inflightBatch // sent, not fully acked, in LSN order
		bytes    int64           // payload bytes of inflight
	}
}

// inflightBatch is one sent Batch as the window sees it.
type inflightBatch struct {
	last       types.LSN // LSN of its last delivery
	bytes      int64     // payload bytes
	logTime    int64     // log time of its last delivery
	dispatched []int64   // per delivery, when the dispatcher pushed it
}

func newConn(term types.Term, stream targetpb.Target_DeliverClient, cancel context.CancelCauseFunc) *conn {
	return &conn{term: term, stream: stream, cancel: cancel, released: make(chan struct{}, 1)}
}

// hasRoom reports whether another batch may be sent, and the payload bytes
// it may carry.
func (c *conn) hasRoom(maxBatches int, maxBytes int64) (bool, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.inflight) >= maxBatches || c.mu.bytes >= maxBytes {
		return false, 0
	}
	return true, maxBytes - c.mu.bytes
}

// sent records msgs (about to be sent as one Batch) in the window.
func (c *conn) sent(msgs []targetqueue.Msg) {
	b := inflightBatch{
		last:       msgs[len(msgs)-1].LSN,
		logTime:    msgs[len(msgs)-1].TimestampUnixNano,
		dispatched: make([]int64, len(msgs)),
	}
	for i, m := range msgs {
		b.bytes += m.Bytes
		b.dispatched[i] = m.DispatchedUnixNano
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.inflight = append(c.mu.inflight, b)
	c.mu.bytes += b.bytes
}

// ack releases the batches wholly covered by the cumulative ack lsn and
// returns them (for delay metrics).
func (c *conn) ack(lsn types.LSN) []inflightBatch {
	c.mu.Lock()
	n := 0
	for n < len(c.mu.inflight) && c.mu.inflight[n].last <= lsn {
		c.mu.bytes -= c.mu.inflight[n].bytes
		n++
	}
	done := c.mu.inflight[:n:n]
	c.mu.inflight = c.mu.inflight[n:]
	c.mu.Unlock()
	if n > 0 {
		signal(c.released)
	}
	return done
}

// window returns the batches and payload bytes in flight.
func (c *conn) window() (batches int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.inflight), c.mu.bytes
}

// signal does a non-blocking send on a capacity-1 channel: a pending signal
// is not lost, and several signals coalesce into one.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// batchOf builds the wire Batch for msgs.
func batchOf(msgs []targetqueue.Msg) *targetpb.DeliverRequest {
	ds := make([]*targetpb.Delivery, len(msgs))
	for i, m := range msgs {
		ds[i] = &targetpb.Delivery{Lsn: uint64(m.LSN), TimestampUnixNano: m.TimestampUnixNano, Slices: m.Slices}
	}
	return &targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Batch{Batch: &targetpb.Batch{
		Deliveries:         ds,
		DispatchedUnixNano: msgs[0].DispatchedUnixNano,
	}}}
}
