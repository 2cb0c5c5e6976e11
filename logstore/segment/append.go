package segment

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// keepBufBytes bounds the frame buffer Append keeps between calls: a rare
// huge record should not pin its memory for good.
const keepBufBytes = 1 << 20

// Append writes one record: txn.Lsn must be LastLSN()+1 and txn.RaftIndex
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
		verifyWrite(s, frame, txn.GetLsn())
	}
	l.publish(s, frame, m)
	l.writebackIfDue(s)
	return nil
}

// verifyWrite reads the record just written back and panics unless it is the
// same bytes and decodes with a good CRC to the same LSN.
func verifyWrite(s *segment, frame []byte, lsn uint64) {
	got := make([]byte, len(frame))
	if _, err := s.f.ReadAt(got, s.size); err != nil {
		panic(fmt.Sprintf("segment: verify lsn %d: read back: %v", lsn, err))
	}
	if !bytes.Equal(got, frame) {
		panic(fmt.Sprintf("segment: verify lsn %d: bytes read back differ", lsn))
	}
	txn, n, err := decodeRecord(got)
	if err != nil || n != len(frame) || txn.GetLsn() != lsn {
		panic(fmt.Sprintf("segment: verify lsn %d: read back lsn %d, %d of %d bytes: %v", lsn, txn.GetLsn(), n, len(frame), err))
	}
}

// seal makes the active segment immutable and starts the next one: fsync the
// segment, write and fsync its index file (through a rename), create the
// next segment file and fsync the directory. A crash at any point leaves a
// directory that Open recovers: until the next segment file exists, the
// sealed one is still the active one and its index file is rebuilt.
func (l *Log) seal() error {
	s := l.active()
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", segFileName(s.base), err)
	}
	data := marshalIndex(s.sealedMeta(), &s.idx)
	if err := writeFileDurable(s.idxPath(), data); err != nil {
		return err
	}
	next := s.lastLSN() + 1
	// O_TRUNC: a file left by an earlier failed seal holds nothing yet.
	f, err := os.OpenFile(l.segPath(next), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if err := syncDir(l.opts.Dir); err != nil {
		_ = f.Close()
		return err
	}
	ns := newSegment(l.opts.Dir, next, f)
	l.mu.Lock()
	s.sealed = true
	s.pos = nil
	s.idxSize, s.idxCRC = int64(len(data)), crc32.Checksum(data, crcTable)
	l.mu.segs = append(l.mu.segs, ns)
	l.w.active = ns
	l.w.writtenBack = 0
	l.mu.Unlock()
	l.log.Debug("sealed segment", "segment", segFileName(s.base), "lsn", s.lastLSN(), "bytes", s.size)
	return nil
}
