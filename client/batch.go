package client

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// DefaultMaxBatchBytes bounds the encoded requests of one coalesced
// AppendBatch call. A node accepts a call of its own request limit plus
// 64 KiB (logstore's gRPC receive slack), so batches of at most 64 KiB
// fit whatever limit a node was configured with; a larger request goes
// alone as a plain Append.
const DefaultMaxBatchBytes = 64 << 10

// maxBatchRequests is logstore.MaxAppendBatchRequests (not imported: the
// client does not link the server; a test keeps the two equal).
const maxBatchRequests = 1024

// maxYields bounds how often a flush yields to let runnable writers join
// its batch.
const maxYields = 4

// errNoBatchRPC is what callers of a batcher whose node has no AppendBatch
// receive: the call was refused unread, so they send a plain Append.
var errNoBatchRPC = errors.New("client: node has no AppendBatch")

// appendBatcher coalesces the Appends that run at the same time on one
// connection into AppendBatch calls: gRPC's per-call cost (HTTP/2 stream,
// headers, a handler goroutine) is paid once per batch instead of once per
// transaction. There is no linger: a flush yields to the goroutines runnable
// at that moment (typically the writers a batch has just answered, coming
// back with their next Append) while the queue keeps growing, at most
// maxYields times, and then sends; on an idle connection (nothing queued,
// no call in flight) an Append goes out at once as a plain Append. Each request keeps its own result and error, exactly as a plain
// Append would answer it, so Client.call's retry rules are unchanged.
//
// Goroutines: a flush runs on a goroutine of its own (at most one waiting
// to take the queue at a time) and ends when its call has answered.
type appendBatcher struct {
	cc       *grpc.ClientConn
	maxBytes int
	noBatch  atomic.Bool // the node answered UNIMPLEMENTED: plain Appends only
	// serial: at most one call in flight; what queues meanwhile goes in
	// the next call, in queue order (a Producer's own batcher: its
	// sequences then reach the leader's intake in order, see Producer).
	serial bool

	mu       sync.Mutex
	queue    []*batchCall
	flushing bool // a flush is scheduled and has not taken the queue yet
	calls    int  // Append and AppendBatch calls of this batcher in flight
}

type batchCall struct {
	ctx  context.Context
	req  *logstorepb.AppendRequest
	size int
	done chan batchResult // capacity 1: a flush never blocks on a caller gone
}

type batchResult struct {
	resp *logstorepb.AppendResponse
	err  error
}

func newAppendBatcher(cc *grpc.ClientConn, maxBytes int) *appendBatcher {
	return &appendBatcher{cc: cc, maxBytes: maxBytes}
}

// append sends req, coalesced with other concurrent appends when it fits.
// Its errors are those of a plain Append on the same connection.
func (b *appendBatcher) append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	size := proto.Size(req)
	if b.maxBytes <= 0 || size > b.maxBytes || b.noBatch.Load() {
		return logstorepb.NewLogStoreClient(b.cc).Append(ctx, req)
	}
	b.mu.Lock()
	if len(b.queue) == 0 && !b.flushing && b.calls == 0 {
		// An idle connection has nothing to coalesce with: a plain
		// Append now, without a flush goroutine and its yields (with one
		// writer per connection they never find company and cost about
		// a fifth of the client's CPU per call). Appends that arrive
		// while it is in flight queue as usual.
		b.calls++
		b.mu.Unlock()
		defer b.callDone()
		return logstorepb.NewLogStoreClient(b.cc).Append(ctx, req)
	}
	call := &batchCall{ctx: ctx, req: req, size: size, done: make(chan batchResult, 1)} // only when queued: the idle path sends without it
	b.queue = append(b.queue, call)
	start := !b.flushing && !(b.serial && b.calls > 0) // serial: callDone starts it
	b.flushing = b.flushing || start
	b.mu.Unlock()
	if start {
		go b.flush()
	}
	select {
	case r := <-call.done:
		if errors.Is(r.err, errNoBatchRPC) {
			return logstorepb.NewLogStoreClient(b.cc).Append(ctx, req)
		}
		return r.resp, r.err
	case <-ctx.Done():
		// Like a plain call cancelled in flight: the outcome is unknown.
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

func (b *appendBatcher) callDone() {
	b.mu.Lock()
	b.calls--
	start := b.serial && b.calls == 0 && len(b.queue) > 0 && !b.flushing
	b.flushing = b.flushing || start
	b.mu.Unlock()
	if start {
		go b.flush()
	}
}

func (b *appendBatcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// flush takes one batch from the queue, schedules the next flush when
// requests remain, and sends the batch.
func (b *appendBatcher) flush() {
	n := b.queued()
	for range maxYields {
		runtime.Gosched()
		m := b.queued()
		if m == n {
			break
		}
		n = m
	}
	b.mu.Lock()
	var batch []*batchCall
	bytes, taken := 0, 0
	for _, c := range b.queue {
		if len(batch) > 0 && (bytes+c.size > b.maxBytes || len(batch) == maxBatchRequests) {
			break
		}
		taken++
		if c.ctx.Err() != nil {
			continue // its caller has returned; never sent
		}
		batch = append(batch, c)
		bytes += c.size
	}
	b.queue = append(b.queue[:0:0], b.queue[taken:]...)
	more := len(b.queue) > 0 && !b.serial // serial: the send's callDone starts the next
	b.flushing = more
	if len(batch) > 0 {
		b.calls++ // counted before the lock is released (serial: no other call starts meanwhile); send's callDone ends it
	}
	b.mu.Unlock()
	if more {
		go b.flush()
	}
	if len(batch) > 0 {
		b.send(batch)
	}
}

// send makes one AppendBatch call for batch and answers every call in it.
func (b *appendBatcher) send(batch []*batchCall) {
	// The call lives as long as its longest-waiting caller (every caller
	// has a deadline: Client.call gives one); a caller that gives up
	// earlier stops waiting, as it would on a plain call.
	var deadline time.Time
	reqs := make([]*logstorepb.AppendRequest, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
		if d, ok := c.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
	}
	if deadline.IsZero() { // not from Client.call: bound it anyway
		deadline = time.Now().Add(DefaultCallTimeout)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer b.callDone() // after every caller is answered (flush counted the call)
	resp, err := logstorepb.NewLogStoreClient(b.cc).AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: reqs})
	if status.Code(err) == codes.Unimplemented && apierr.Detail(err) == nil {
		b.noBatch.Store(true)
		err = errNoBatchRPC
	}
	if err == nil && len(resp.Results) != len(batch) {
		err = apierr.Newf(logstorepb.ErrorCode_INTERNAL, "AppendBatch answered %d results for %d requests", len(resp.Results), len(batch))
	}
	for i, c := range batch {
		if err != nil {
			c.done <- batchResult{err: err}
			continue
		}
		c.done <- decodeResult(resp.Results[i])
	}
}

// decodeResult is one request's answer as a plain Append would give it.
func decodeResult(r *logstorepb.AppendResult) batchResult {
	switch {
	case r.GetError() != nil:
		return batchResult{err: apierr.Decode(r.GetError())}
	case r.GetResponse() != nil:
		return batchResult{resp: r.GetResponse()}
	}
	return batchResult{err: apierr.Newf(logstorepb.ErrorCode_INTERNAL, "AppendBatch answered an empty result")}
}
