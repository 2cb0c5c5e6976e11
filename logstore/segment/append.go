package segment

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/logplayer/logplayer/types"
)

// keepBufBytes bounds the frame buffer AppendBatch keeps between calls: a
// rare huge record should not pin its memory for good.
const keepBufBytes = 1 << 20

// verifyWrite reads the record just written back and panics unless it is the
// same bytes and decodes with a good CRC to the same LSN.
func verifyWrite(s *segment, frame []byte, lsn types.LSN) {
	got := make([]byte, len(frame))
	if _, err := s.f.ReadAt(got, s.size); err != nil {
		panic(fmt.Sprintf("segment: verify lsn %d: read back: %v", lsn, err))
	}
	if !bytes.Equal(got, frame) {
		panic(fmt.Sprintf("segment: verify lsn %d: bytes read back differ", lsn))
	}
	txn, n, err := decodeRecord(got)
	if err != nil || n != len(frame) || types.LSN(txn.GetLsn()) != lsn {
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
