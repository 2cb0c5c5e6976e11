package segment

import (
	"fmt"
	"hash/crc32"
	"io"
	"maps"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// SegmentFileName and IndexFileName are the file names of the sealed
// segment whose first LSN is base and of its index (see the package doc).
func SegmentFileName(base types.LSN) string { return segFileName(base) }

// IndexFileName: see SegmentFileName.
func IndexFileName(base types.LSN) string { return idxFileName(base) }

// Dir is the directory of the log's segment files (Options.Dir).
func (l *Log) Dir() string { return l.opts.Dir }

// Sealed is one sealed segment read outside a Log: a copy of a segment file
// and its index file (tiered storage keeps them in object storage,
// logstore/tier). It is read like the Log's own sealed segments, with the
// same checks: OpenSealed checks the index's CRC and the file's size and
// CRC-32C against it, and every record read is checked again (CRC, LSN).
// Safe for concurrent readers; Close when done.
type Sealed struct {
	s *segment
}

// OpenSealed opens the sealed segment in segPath described by the index
// file idxPath. A file that disagrees with its index is ErrCorrupt.
func OpenSealed(fsys vfs.FS, segPath, idxPath string) (*Sealed, error) {
	b, err := vfs.ReadFile(fsys, idxPath)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	meta, x, err := unmarshalIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", idxPath, err)
	}
	f, err := fsys.Open(segPath)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	if err := checkWhole(f, meta); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", segPath, err)
	}
	return &Sealed{s: newSealedSegment("", f, meta, x, b)}, nil
}

// checkWhole reads f whole and checks its size and CRC-32C against meta.
func checkWhole(f vfs.File, meta sealedMeta) error {
	h := crc32.New(crcTable)
	n, err := io.Copy(h, io.NewSectionReader(f, 0, meta.size+1))
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if n != meta.size || h.Sum32() != meta.crc {
		return fmt.Errorf("%w: %d bytes with crc %08x, index says %d bytes with crc %08x", ErrCorrupt, n, h.Sum32(), meta.size, meta.crc)
	}
	return nil
}

// FirstLSN and LastLSN are the segment's LSN range.
func (x *Sealed) FirstLSN() types.LSN { return x.s.base }

// LastLSN: see FirstLSN.
func (x *Sealed) LastLSN() types.LSN { return x.s.lastLSN() }

// Topics returns each topic's offset range [first, end) in the segment.
func (x *Sealed) Topics() map[string][2]types.Offset {
	out := make(map[string][2]types.Offset, len(x.s.idx.topics))
	for name, t := range maps.All(x.s.idx.topics) {
		out[name] = [2]types.Offset{t.first, t.end}
	}
	return out
}

// Read calls fn with each record with LSN in [from, to] (clamped to the
// segment) in order, as Log.Read does.
func (x *Sealed) Read(from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) error {
	s := x.s
	if from < s.base || from > s.lastLSN() {
		return fmt.Errorf("%w: lsn %d is not in segment %s (%d..%d)", ErrNotFound, from, segFileName(s.base), s.base, s.lastLSN())
	}
	if to == 0 || to > s.lastLSN() {
		to = s.lastLSN()
	}
	e := s.idx.seekLSN(from)
	_, err := readSpan(span{s: s, pos: e.pos, end: s.size, lsn: e.lsn, last: s.lastLSN()}, from, to, fn)
	return err
}

// TopicOffsetLSN returns the LSN of the record whose slice of topic holds
// offset; ErrNotFound when the segment does not hold it.
func (x *Sealed) TopicOffsetLSN(topic string, offset types.Offset) (types.LSN, error) {
	s := x.s
	t := s.idx.topics[topic]
	if t == nil || offset < t.first || offset >= t.end {
		return 0, fmt.Errorf("%w: topic %q offset %d is not in segment %s", ErrNotFound, topic, offset, segFileName(s.base))
	}
	return scanTopic(span{s: s, end: s.size, last: s.lastLSN()}, t.seek(offset), topic, offset)
}

// Close releases the file (readers in progress finish first).
func (x *Sealed) Close() error {
	x.s.release()
	return nil
}
