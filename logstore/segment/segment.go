package segment

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/logplayer/logplayer/types"
)

const (
	segExt = ".seg"
	idxExt = ".idx"
	tmpExt = ".tmp"
	// nameDigits is the width of the zero-padded first LSN in file names, so
	// names sort like LSNs (20 digits hold any uint64).
	nameDigits = 20
)

func segFileName(base types.LSN) string { return fmt.Sprintf("%0*d%s", nameDigits, base, segExt) }
func idxFileName(base types.LSN) string { return fmt.Sprintf("%0*d%s", nameDigits, base, idxExt) }

// parseFileName returns the first LSN and extension of a segment or index
// file name, ok false for any other name.
func parseFileName(name string) (base types.LSN, ext string, ok bool) {
	ext = filepath.Ext(name)
	if ext != segExt && ext != idxExt {
		return 0, "", false
	}
	digits := strings.TrimSuffix(name, ext)
	if len(digits) != nameDigits {
		return 0, "", false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 {
		return 0, "", false
	}
	return types.LSN(n), ext, true
}

// segment is one .seg file and its index.
//
// Reference counting: refs starts at 1, the Log's own reference while the
// segment is listed in Log.mu.segs. A reader takes a reference under Log.mu
// (read lock) before its I/O and drops it after; removing the segment from
// the list drops the Log's reference. The file is closed when the count
// reaches zero, so a reader can finish a segment that retention, truncation
// or Install has unlinked meanwhile (the bytes it was promised never change:
// see the package doc).
type segment struct {
	base types.LSN // first LSN; the file name
	dir  string
	f    *os.File
	refs atomic.Int64

	// The fields below are written only by the writer, under Log.mu's write
	// lock, and read under Log.mu (either mode) or by the writer.

	sealed bool
	count  uint64 // records; the last LSN is base+count-1
	size   int64  // bytes of whole records; the file holds nothing past it
	crc    uint32 // CRC-32C of the file's bytes [0, size)
	// Raft indexes and timestamps of the first and last records.
	firstRaft, lastRaft uint64
	firstTime, lastTime int64
	idx                 segIndex
	// pos holds every record's position while the segment is active (the
	// dense index Get and Checkpoint use); nil once sealed.
	pos []int64
	// idxSize and idxCRC describe the .idx file once sealed.
	idxSize int64
	idxCRC  uint32
}

func newSegment(dir string, base types.LSN, f *os.File) *segment {
	s := &segment{base: base, dir: dir, f: f, idx: newSegIndex()}
	s.refs.Store(1)
	return s
}

func (s *segment) segPath() string { return filepath.Join(s.dir, segFileName(s.base)) }
func (s *segment) idxPath() string { return filepath.Join(s.dir, idxFileName(s.base)) }

// lastLSN is the LSN of the segment's last record, base-1 when empty.
func (s *segment) lastLSN() types.LSN { return s.base + types.LSN(s.count) - 1 }

func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference and closes the file with the last one.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.f.Close()
	}
}

// check reports a record that does not continue the segment: its LSN, its
// Raft index (not below prevRaft, the previous record's) or a topic's
// offsets out of sequence. Writer only.
func (s *segment) check(m *recordMeta, prevRaft uint64) error {
	if want := s.base + types.LSN(s.count); m.lsn != want {
		return fmt.Errorf("record has lsn %d, want %d", m.lsn, want)
	}
	if m.raftIndex < prevRaft {
		return fmt.Errorf("lsn %d has raft index %d below the previous %d", m.lsn, m.raftIndex, prevRaft)
	}
	return s.idx.checkSlices(m)
}

// add indexes a checked record just written (or scanned) at the end of the
// segment: frame is its framed bytes, m its parsed keys. Called by the
// writer under Log.mu's write lock once the segment is visible to readers.
func (s *segment) add(frame []byte, m *recordMeta, o *Options) {
	pos := s.size
	s.idx.addRecord(m.lsn, pos, m.raftIndex, o.IndexIntervalBytes)
	for _, sl := range m.slices {
		s.idx.addSlice(sl.topic, sl.firstOffset, sl.messages, m.lsn, pos, o.TopicIndexIntervalBytes)
	}
	if s.count == 0 {
		s.firstRaft, s.firstTime = m.raftIndex, m.timestamp
	}
	s.lastRaft, s.lastTime = m.raftIndex, m.timestamp
	s.pos = append(s.pos, pos)
	s.count++
	s.size += int64(len(frame))
	s.crc = crc32.Update(s.crc, crcTable, frame)
}

// sealedMeta returns the header of the segment's index file.
func (s *segment) sealedMeta() sealedMeta {
	return sealedMeta{
		base: s.base, count: s.count, size: s.size, crc: s.crc,
		firstRaft: s.firstRaft, lastRaft: s.lastRaft,
		firstTime: s.firstTime, lastTime: s.lastTime,
	}
}

// info describes the segment for Segments.
func (s *segment) info() SegmentInfo {
	si := SegmentInfo{
		Name:     segFileName(s.base),
		FirstLSN: s.base,
		LastLSN:  s.lastLSN(),
		Bytes:    s.size + s.idxSize,
		Sealed:   s.sealed,
	}
	if s.count > 0 {
		si.FirstTime = time.Unix(0, s.firstTime)
		si.LastTime = time.Unix(0, s.lastTime)
	}
	return si
}

// SegmentInfo describes one segment file (and its index file once sealed).
type SegmentInfo struct {
	Name     string
	FirstLSN types.LSN
	// LastLSN is FirstLSN-1 for an empty segment.
	LastLSN types.LSN
	// Bytes counts the segment file and its index file.
	Bytes int64
	// FirstTime and LastTime are the leader timestamps of the first and last
	// records; zero for an empty segment.
	FirstTime, LastTime time.Time
	// Sealed is false for the active (last) segment only.
	Sealed bool
}
