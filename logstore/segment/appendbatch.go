package segment

import (
	"fmt"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// AppendBatch appends txns in order with one write call per segment file
// they land in instead of one per record (the FSM appends every transaction
// of a Raft entry at once). It is the log's only append: the files end up
// byte-identical to those of one record per call (the tests' Append), since
// a full active segment is sealed before the record that would go past
// SegmentBytes. Nothing is fsynced (see the package doc).
//
// The same rules hold per record (LSNs continue LastLSN, Raft indexes do not
// go down, slices continue their topics' offsets and name each topic once;
// each violation panics). The records of one write are checked after the
// write but before readers can see them, and a violation first cuts the
// file back to the records published so far. When AppendBatch returns, every
// record is visible to Get and Read. An error (encoding, disk) leaves a
// prefix of txns appended, possibly none: LastLSN says how far.
func (l *Log) AppendBatch(txns []*logstorepb.Transaction) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	for len(txns) > 0 {
		if err := l.sealIfFull(); err != nil {
			return err
		}
		n, err := l.writeChunk(txns)
		if err != nil {
			return err
		}
		txns = txns[n:]
	}
	return nil
}

// sealIfFull seals the active segment when it holds SegmentBytes or more.
// Writer only.
func (l *Log) sealIfFull() error {
	if s := l.active(); s.count == 0 || s.size < l.opts.SegmentBytes {
		return nil
	}
	start := time.Now()
	if err := l.seal(); err != nil {
		return err
	}
	l.stats.seals.Add(1)
	l.stats.sealNanos.Add(int64(time.Since(start)))
	return nil
}

// writeChunk frames the first records of txns that fit in the active
// segment (at least one; the active segment is not full), writes them with
// one call, then checks and publishes them one by one. It returns how many
// it appended.
func (l *Log) writeChunk(txns []*logstorepb.Transaction) (int, error) {
	s := l.active()
	buf := l.w.buf[:0]
	var ends []int // end of each frame in buf
	for _, txn := range txns {
		if len(ends) > 0 && s.size+int64(len(buf)) >= l.opts.SegmentBytes {
			break // a record at a time would seal before this one
		}
		var err error
		if buf, err = appendRecord(buf, txn); err != nil {
			return 0, err
		}
		ends = append(ends, len(buf))
	}
	if cap(buf) <= keepBufBytes {
		l.w.buf = buf[:0]
	} else {
		l.w.buf = nil
	}
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		_ = s.f.Truncate(s.size) // spare a restart the torn tail
		return 0, fmt.Errorf("segment: write lsn %d..%d to %s: %w", txns[0].GetLsn(), txns[len(ends)-1].GetLsn(), segFileName(s.base), err)
	}
	m := &l.w.meta
	start := 0
	for i, end := range ends {
		frame := buf[start:end]
		start = end
		if err := parseMeta(frame[headerBytes:], m); err != nil {
			panic(fmt.Sprintf("segment: lsn %d: our own encoding does not parse: %v", txns[i].GetLsn(), err))
		}
		if err := s.check(m, l.mu.lastRaft); err != nil {
			_ = s.f.Truncate(s.size) // nothing unchecked stays on disk
			panic(fmt.Sprintf("segment: append: %v", err))
		}
		if l.opts.VerifyWrites {
			verifyWrite(s, frame, m.lsn)
		}
		l.publish(s, frame, m)
	}
	l.writebackIfDue(s)
	return len(ends), nil
}

// publish makes a checked record just written at the end of the active
// segment s visible to readers. Writer only.
func (l *Log) publish(s *segment, frame []byte, m *recordMeta) {
	l.mu.Lock()
	s.add(frame, m, &l.opts)
	l.mu.lastLSN = m.lsn
	l.mu.lastRaft = m.raftIndex
	l.mu.Unlock()
}

// writebackIfDue starts the kernel's writeback of the active segment s
// every WritebackBytes. Writer only.
func (l *Log) writebackIfDue(s *segment) {
	if n := s.size - l.w.writtenBack; n >= l.opts.WritebackBytes {
		startWriteback(s.f, l.w.writtenBack, n)
		l.w.writtenBack = s.size
	}
}
