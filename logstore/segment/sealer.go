package segment

import (
	"fmt"
	"sync"
	"time"

	"github.com/logplayer/logplayer/internal/failpoint"
)

// sealQueueMax bounds the sealed segments waiting for the sealer: each is
// SegmentBytes of page cache not yet known durable. When the disk cannot keep
// up with four whole segments, the writer waits (back-pressure on the apply
// goroutine) instead of letting dirty data grow.
const sealQueueMax = 4

// sealJob is one segment sealed in memory by the writer: the sealer fsyncs
// its file and writes idx, its index file.
type sealJob struct {
	s   *segment // holds a reference, dropped when done
	idx []byte
}

// sealer is the Log's one goroutine: it makes sealed segments durable in the
// order they were sealed (fsync the segment, then write its index file
// through a rename and fsync the directory), so that the writer's seal costs
// no fsync. An index file on disk therefore always describes a durable
// segment, and the index of segment i+1 is never durable before that of i.
//
// A failure is sticky: after an fsync error the kernel may have dropped the
// dirty pages, so no later success can be trusted. Every later AppendBatch,
// Sync and Checkpoint returns it (ErrNotDurable) and the queue is drained
// without I/O.
type sealer struct {
	mu struct {
		sync.Mutex
		queue []sealJob
		// queued and done count jobs since Open; flush waits for done to
		// reach the queued count it saw.
		queued, done uint64
		err          error
		closed       bool
		// manual (tests only, set before the first seal): the goroutine
		// leaves the queue alone, which is unbounded, and the test runs
		// seals with sealOne; flushSeals runs them itself.
		manual bool
	}
	cond    *sync.Cond // on mu: a job was queued or finished, or closed
	stopped chan struct{}
}

func (l *Log) startSealer() {
	l.sealer.cond = sync.NewCond(&l.sealer.mu)
	l.sealer.stopped = make(chan struct{})
	go l.runSealer()
}

// runSealer is the sealer goroutine.
func (l *Log) runSealer() {
	sl := &l.sealer
	defer close(sl.stopped)
	for {
		sl.mu.Lock()
		for (len(sl.mu.queue) == 0 || sl.mu.manual) && !sl.mu.closed {
			sl.cond.Wait()
		}
		if len(sl.mu.queue) == 0 {
			sl.mu.Unlock()
			return
		}
		sl.mu.Unlock()
		l.sealOne()
	}
}

// sealOne makes the oldest queued segment durable; false if none is queued.
func (l *Log) sealOne() bool {
	sl := &l.sealer
	sl.mu.Lock()
	if len(sl.mu.queue) == 0 {
		sl.mu.Unlock()
		return false
	}
	j := sl.mu.queue[0]
	failed := sl.mu.err != nil
	sl.mu.Unlock()
	var err error
	if !failed {
		start := time.Now()
		err = l.syncSealed(j.s, j.idx)
		l.stats.sealSyncNanos.Add(int64(time.Since(start)))
	}
	j.s.release()
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.mu.queue[0] = sealJob{}
	sl.mu.queue = sl.mu.queue[1:]
	sl.mu.done++
	if err != nil {
		l.failLocked(err)
	}
	sl.cond.Broadcast()
	return true
}

// syncSealed makes the sealed segment s durable: fsync its file, then write
// idx as its index file (tmp, fsync, rename, fsync of the directory, which
// also makes the next segment's creation durable).
func (l *Log) syncSealed(s *segment, idx []byte) error {
	if err := failpoint.Inject(failpoint.SegmentSync); err != nil {
		return fmt.Errorf("segment: sync %s: %w", segFileName(s.base), err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", segFileName(s.base), err)
	}
	return writeFileDurable(l.fs, s.idxPath(), idx)
}

// enqueueSeal hands a sealed segment to the sealer, waiting while
// sealQueueMax are pending. Writer only.
func (l *Log) enqueueSeal(j sealJob) error {
	sl := &l.sealer
	sl.mu.Lock()
	defer sl.mu.Unlock()
	for len(sl.mu.queue) >= sealQueueMax && !sl.mu.manual && sl.mu.err == nil && !sl.mu.closed {
		sl.cond.Wait()
	}
	switch {
	case sl.mu.err != nil:
		return sl.mu.err
	case sl.mu.closed:
		return ErrClosed
	}
	j.s.acquire()
	sl.mu.queue = append(sl.mu.queue, j)
	sl.mu.queued++
	sl.cond.Broadcast()
	return nil
}

// flushSeals waits until every segment sealed before the call is durable and
// returns the sticky failure, if any.
func (l *Log) flushSeals() error {
	sl := &l.sealer
	sl.mu.Lock()
	defer sl.mu.Unlock()
	target := sl.mu.queued
	for sl.mu.done < target && sl.mu.err == nil {
		if sl.mu.manual {
			sl.mu.Unlock()
			l.sealOne()
			sl.mu.Lock()
			continue
		}
		sl.cond.Wait()
	}
	return sl.mu.err
}

// durableErr returns the sticky failure, nil while the log is healthy.
func (l *Log) durableErr() error {
	l.sealer.mu.Lock()
	defer l.sealer.mu.Unlock()
	return l.sealer.mu.err
}

// fail records err (an fsync or write that would have made data durable
// failed) as the log's sticky failure and returns it.
func (l *Log) fail(err error) error {
	l.sealer.mu.Lock()
	defer l.sealer.mu.Unlock()
	l.failLocked(err)
	l.sealer.cond.Broadcast()
	return l.sealer.mu.err
}

func (l *Log) failLocked(err error) {
	if l.sealer.mu.err == nil {
		l.sealer.mu.err = fmt.Errorf("%w: %w", ErrNotDurable, err)
		l.log.Error("the segment log cannot make its data durable; it refuses every further append and sync", "err", err)
	}
}

// stopSealer lets the sealer finish the queued jobs and waits for it to
// exit. Close only.
func (l *Log) stopSealer() {
	l.sealer.mu.Lock()
	l.sealer.mu.closed = true
	l.sealer.cond.Broadcast()
	l.sealer.mu.Unlock()
	<-l.sealer.stopped
}
