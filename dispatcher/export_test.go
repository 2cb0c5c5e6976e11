package dispatcher

import (
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// NextBatch takes the next batch for a target whatever its term, and returns
// it with the term it belongs to. Tests only: a sender must use
// NextBatchForTerm, so that a sender of an older stream can never take
// messages meant for the new one.
func (d *Dispatcher) NextBatch(id string, maxCount int, maxBytes int64) (msgs []targetqueue.Msg, term types.Term) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.mu.targets[id]
	if !ok {
		return nil, 0
	}
	return t.q.NextBatch(maxCount, maxBytes), t.q.Term()
}

// Ack records a cumulative ack whatever the stream's term, without the
// bogus-ack check. Tests only: a receiver must use AckTerm. Unknown ids are
// ignored.
func (d *Dispatcher) Ack(id string, lsn types.LSN) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.mu.targets[id]; ok {
		t.ack(lsn)
	}
}
