package target

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// queueBudget is the byte bound of the applier queue (Config.MaxQueueBytes).
// The count bound alone (queueBatches × MaxBatchBytes) would let one stream
// pin 4 GiB. A receiver reserves a batch's encoded size before it queues the
// batch and waits, without reading its stream, while the bound is reached
// (gRPC flow control then pushes back on the LogPlayer); the applier releases
// the bytes when it takes the batch off the queue. One batch of any size is
// admitted when nothing is queued, so a batch up to MaxBatchBytes always
// passes. Hellos and end marks cost nothing.
//
// Memory held by received batches is then at most MaxQueueBytes (or one
// batch) queued, plus the group the applier holds (MaxGroupBytes plus one
// batch), plus one decoded batch per receiver waiting here.
type queueBudget struct {
	max   int
	gauge prometheus.Gauge // target_apply_queue_bytes: set under mu
	mu    struct {
		sync.Mutex
		bytes   int           // reserved: queued, not yet taken by the applier
		waiting int           // receivers waiting for room
		freed   chan struct{} // closed and replaced when bytes go down
	}
}

func newQueueBudget(max int, gauge prometheus.Gauge) *queueBudget {
	b := &queueBudget{max: max, gauge: gauge}
	b.mu.freed = make(chan struct{})
	return b
}

// reserve takes n bytes, waiting while they do not fit. It reports false,
// with nothing taken, when ended (the stream's) or quit (the Server's)
// closes first.
func (b *queueBudget) reserve(n int, ended, quit <-chan struct{}) bool {
	b.mu.Lock()
	for b.mu.bytes > 0 && b.mu.bytes+n > b.max {
		freed := b.mu.freed
		b.mu.waiting++
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ended:
		case <-quit:
		}
		b.mu.Lock()
		b.mu.waiting--
		select {
		case <-ended:
			b.mu.Unlock()
			return false
		case <-quit:
			b.mu.Unlock()
			return false
		default:
		}
	}
	b.mu.bytes += n
	b.gauge.Set(float64(b.mu.bytes))
	b.mu.Unlock()
	return true
}

// release returns n bytes reserved before.
func (b *queueBudget) release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.mu.bytes -= n
	b.gauge.Set(float64(b.mu.bytes))
	close(b.mu.freed)
	b.mu.freed = make(chan struct{})
	b.mu.Unlock()
}

// state returns the bytes reserved and the receivers waiting.
func (b *queueBudget) state() (bytes, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.bytes, b.mu.waiting
}
