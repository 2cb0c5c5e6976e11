package segment

import (
	"fmt"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Append writes one record, the way AppendBatch writes each of its records,
// but checks the LSN and Raft index before writing instead of after. Tests
// only (the FSM appends through AppendBatch); it stays the reference that
// AppendBatch's files are compared with byte for byte.
//
// txn.Lsn must be LastLSN()+1 and txn.RaftIndex
// at least LastRaftIndex() (both panic otherwise: the caller's bug). The
// record is written with one write call and no fsync (the Raft log is the
// write-ahead log; Sync and Checkpoint make it durable); when Append returns
// it is visible to Get and Read. Slices must continue their topics' offsets
// and name each topic once (panics otherwise). Before writing, a full active
// segment is sealed and a new one started. An error (encoding, disk) leaves
// the log as it was.
func (l *Log) Append(txn *logstorepb.Transaction) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	l.appendCheck(txn)
	frame, err := appendRecord(l.w.buf[:0], txn)
	if err != nil {
		return err
	}
	if cap(frame) <= keepBufBytes {
		l.w.buf = frame[:0]
	} else {
		l.w.buf = nil
	}
	m := &l.w.meta
	if err := parseMeta(frame[headerBytes:], m); err != nil {
		panic(fmt.Sprintf("segment: lsn %d: our own encoding does not parse: %v", txn.GetLsn(), err))
	}
	if err := l.sealIfFull(); err != nil {
		return err
	}
	s := l.active()
	if err := s.check(m, l.mu.lastRaft); err != nil {
		panic(fmt.Sprintf("segment: append: %v", err))
	}
	if _, err := s.f.WriteAt(frame, s.size); err != nil {
		// Readers never look past s.size and the next write starts there;
		// the truncate only spares a restart the scan of a torn tail.
		_ = s.f.Truncate(s.size)
		return fmt.Errorf("segment: write lsn %d to %s: %w", txn.GetLsn(), segFileName(s.base), err)
	}
	if l.opts.VerifyWrites {
		verifyWrite(s, frame, types.LSN(txn.GetLsn()))
	}
	l.publish(s, frame, m)
	l.writebackIfDue(s)
	return nil
}

// appendCheck is what Append validates of a transaction before writing it.
func (l *Log) appendCheck(txn *logstorepb.Transaction) {
	if want := l.mu.lastLSN + 1; types.LSN(txn.GetLsn()) != want {
		panic(fmt.Sprintf("segment: append lsn %d, want %d (last lsn %d)", txn.GetLsn(), want, l.mu.lastLSN))
	}
	if txn.GetRaftIndex() < l.mu.lastRaft {
		panic(fmt.Sprintf("segment: append lsn %d with raft index %d below the last %d", txn.GetLsn(), txn.GetRaftIndex(), l.mu.lastRaft))
	}
}
