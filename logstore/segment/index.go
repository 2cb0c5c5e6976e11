package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/logplayer/logplayer/types"
)

// segIndex is the sparse index of one segment: enough to seek to an LSN, a
// Raft index or a topic offset and then scan forward a bounded number of
// bytes. It is built record by record while the segment is active and
// written to the segment's .idx file when the segment is sealed.
//
// Invariants: lsns is sorted by lsn (and so by pos and raftIndex); its first
// entry is the segment's first record (pos 0). Each topic's entries are
// sorted by offset; its first entry is the topic's first slice in the
// segment. Consecutive entries are at most interval bytes apart plus one
// record (a scan from an entry reads at most that much).
type segIndex struct {
	lsns   []lsnEntry
	topics map[string]*topicRange
}

// lsnEntry says the record of lsn starts at byte pos and has raftIndex.
type lsnEntry struct {
	lsn       types.LSN
	pos       int64
	raftIndex uint64
}

// topicRange is one topic's part of a segment: the messages at offsets
// [first, end) live in this segment.
type topicRange struct {
	first, end types.Offset
	entries    []topicEntry
}

// topicEntry says the slice holding offset (as its first message) is in the
// record of lsn, at byte pos.
type topicEntry struct {
	offset types.Offset
	lsn    types.LSN
	pos    int64
}

func newSegIndex() segIndex {
	return segIndex{topics: make(map[string]*topicRange)}
}

// addRecord indexes the record of lsn at pos when it is the first or at least
// interval bytes after the previous entry.
func (x *segIndex) addRecord(lsn types.LSN, pos int64, raftIndex uint64, interval int64) {
	if n := len(x.lsns); n == 0 || pos-x.lsns[n-1].pos >= interval {
		x.lsns = append(x.lsns, lsnEntry{lsn: lsn, pos: pos, raftIndex: raftIndex})
	}
}

// addSlice indexes a slice of messages [first, first+messages) of topic held
// by the record of lsn at pos. The caller has checked that the slice
// continues the topic's offsets in this segment (checkSlices).
func (x *segIndex) addSlice(topic []byte, first types.Offset, messages uint64, lsn types.LSN, pos, interval int64) {
	if messages == 0 {
		return
	}
	t := x.topics[string(topic)]
	if t == nil {
		x.topics[string(topic)] = &topicRange{
			first: first, end: first + types.Offset(messages),
			entries: []topicEntry{{offset: first, lsn: lsn, pos: pos}},
		}
		return
	}
	if pos-t.entries[len(t.entries)-1].pos >= interval {
		t.entries = append(t.entries, topicEntry{offset: first, lsn: lsn, pos: pos})
	}
	t.end = first + types.Offset(messages)
}

// checkSlices reports a record whose slices do not continue their topics'
// offsets in this segment (offsets are dense) or name a topic twice.
func (x *segIndex) checkSlices(m *recordMeta) error {
	// Pairwise for the usual few slices; a set beyond (allocates).
	const pairwiseSlices = 16
	var seen map[string]bool
	if len(m.slices) > pairwiseSlices {
		seen = make(map[string]bool, len(m.slices))
	}
	for i, sl := range m.slices {
		dup := false
		if seen != nil {
			dup = seen[string(sl.topic)]
			seen[string(sl.topic)] = true
		} else {
			for _, prev := range m.slices[:i] {
				dup = dup || bytes.Equal(prev.topic, sl.topic)
			}
		}
		if dup {
			return fmt.Errorf("lsn %d names topic %q twice", m.lsn, sl.topic)
		}
		if t := x.topics[string(sl.topic)]; t != nil && sl.messages > 0 && sl.firstOffset != t.end {
			return fmt.Errorf("lsn %d topic %q starts at offset %d, want %d", m.lsn, sl.topic, sl.firstOffset, t.end)
		}
	}
	return nil
}

// seekLSN returns the last entry at or before lsn.
func (x *segIndex) seekLSN(lsn types.LSN) lsnEntry {
	i := sort.Search(len(x.lsns), func(i int) bool { return x.lsns[i].lsn > lsn })
	return x.lsns[max(i-1, 0)]
}

// seekRaft returns an entry from which a forward scan reaches the first
// record whose Raft index is above idx: the last entry with raftIndex <= idx,
// or the first entry.
func (x *segIndex) seekRaft(idx uint64) lsnEntry {
	i := sort.Search(len(x.lsns), func(i int) bool { return x.lsns[i].raftIndex > idx })
	return x.lsns[max(i-1, 0)]
}

// seek returns the last entry at or before offset (offset must be in
// [t.first, t.end)).
func (t *topicRange) seek(offset types.Offset) topicEntry {
	i := sort.Search(len(t.entries), func(i int) bool { return t.entries[i].offset > offset })
	return t.entries[max(i-1, 0)]
}

// indexMagic starts every .idx file; the digit is the format version.
var indexMagic = []byte("LPSIDX01")

// sealedMeta is the summary of a sealed segment kept in its .idx file header.
type sealedMeta struct {
	base      types.LSN // first LSN
	count     uint64    // records
	size      int64     // bytes of the .seg file
	crc       uint32    // CRC-32C of the whole .seg file
	firstRaft uint64
	lastRaft  uint64
	firstTime int64 // Unix nanoseconds of the first and last record
	lastTime  int64
}

// Index file format (.idx, written once when a segment is sealed, then
// immutable; little-endian):
//
//	magic "LPSIDX01"
//	header     base u64, count u64, size i64, crc u32, firstRaft u64,
//	           lastRaft u64, firstTime i64, lastTime i64
//	lsns       n u32, then n × (lsn u64, pos i64, raftIndex u64)
//	topics     n u32, then n × (nameLen u32, name, first u64, end u64,
//	           m u32, then m × (offset u64, lsn u64, pos i64)), sorted by name
//	trailer    CRC-32C u32 of every byte before it
//
// Topics are sorted so that replicas write identical index files.
func marshalIndex(meta sealedMeta, x *segIndex) []byte {
	b := append([]byte(nil), indexMagic...)
	le := binary.LittleEndian
	b = le.AppendUint64(b, uint64(meta.base))
	b = le.AppendUint64(b, meta.count)
	b = le.AppendUint64(b, uint64(meta.size))
	b = le.AppendUint32(b, meta.crc)
	b = le.AppendUint64(b, meta.firstRaft)
	b = le.AppendUint64(b, meta.lastRaft)
	b = le.AppendUint64(b, uint64(meta.firstTime))
	b = le.AppendUint64(b, uint64(meta.lastTime))
	b = le.AppendUint32(b, uint32(len(x.lsns)))
	for _, e := range x.lsns {
		b = le.AppendUint64(b, uint64(e.lsn))
		b = le.AppendUint64(b, uint64(e.pos))
		b = le.AppendUint64(b, e.raftIndex)
	}
	names := make([]string, 0, len(x.topics))
	for name := range x.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	b = le.AppendUint32(b, uint32(len(names)))
	for _, name := range names {
		t := x.topics[name]
		b = le.AppendUint32(b, uint32(len(name)))
		b = append(b, name...)
		b = le.AppendUint64(b, uint64(t.first))
		b = le.AppendUint64(b, uint64(t.end))
		b = le.AppendUint32(b, uint32(len(t.entries)))
		for _, e := range t.entries {
			b = le.AppendUint64(b, uint64(e.offset))
			b = le.AppendUint64(b, uint64(e.lsn))
			b = le.AppendUint64(b, uint64(e.pos))
		}
	}
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// unmarshalIndex decodes and checks an .idx file. Every inconsistency (bad
// CRC, entries out of order or outside the segment) wraps ErrCorrupt.
func unmarshalIndex(b []byte) (sealedMeta, segIndex, error) {
	var meta sealedMeta
	x := newSegIndex()
	bad := func(format string, args ...any) (sealedMeta, segIndex, error) {
		return sealedMeta{}, segIndex{}, fmt.Errorf("%w: index: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(b) < len(indexMagic)+4 || !bytes.Equal(b[:len(indexMagic)], indexMagic) {
		return bad("no magic")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return bad("crc 0x%08x, trailer says 0x%08x", got, sum)
	}
	d := decoder{b: body[len(indexMagic):]}
	meta.base = types.LSN(d.u64())
	meta.count = d.u64()
	meta.size = int64(d.u64())
	meta.crc = d.u32()
	meta.firstRaft = d.u64()
	meta.lastRaft = d.u64()
	meta.firstTime = int64(d.u64())
	meta.lastTime = int64(d.u64())
	// Each entry takes 24 bytes: a count larger than the bytes left is
	// corruption, caught before allocating for it.
	n := d.count(24)
	x.lsns = make([]lsnEntry, 0, n)
	for range n {
		e := lsnEntry{lsn: types.LSN(d.u64()), pos: int64(d.u64()), raftIndex: d.u64()}
		x.lsns = append(x.lsns, e)
	}
	topics := d.count(24)
	prevName := ""
	for i := range topics {
		name := string(d.bytes(d.count(1)))
		t := &topicRange{first: types.Offset(d.u64()), end: types.Offset(d.u64())}
		m := d.count(24)
		t.entries = make([]topicEntry, 0, m)
		for range m {
			t.entries = append(t.entries, topicEntry{offset: types.Offset(d.u64()), lsn: types.LSN(d.u64()), pos: int64(d.u64())})
		}
		if d.err != nil {
			break
		}
		if i > 0 && name <= prevName {
			return bad("topic %q after %q", name, prevName)
		}
		prevName = name
		x.topics[name] = t
	}
	if d.err != nil {
		return bad("%v", d.err)
	}
	if len(d.b) != 0 {
		return bad("%d trailing bytes", len(d.b))
	}
	if err := checkIndex(meta, &x); err != nil {
		return bad("%v", err)
	}
	return meta, x, nil
}

// checkIndex checks what a sealed index promises: entries in order and inside
// the segment, so lookups through it can trust positions and LSNs.
func checkIndex(meta sealedMeta, x *segIndex) error {
	if meta.count == 0 || meta.size <= 0 || meta.base == 0 {
		return fmt.Errorf("empty sealed segment (base %d, count %d, size %d)", meta.base, meta.count, meta.size)
	}
	last := meta.base + types.LSN(meta.count) - 1
	if last < meta.base {
		return fmt.Errorf("lsn range overflows: base %d count %d", meta.base, meta.count)
	}
	if len(x.lsns) == 0 || x.lsns[0].lsn != meta.base || x.lsns[0].pos != 0 {
		return fmt.Errorf("first lsn entry is not the first record")
	}
	if meta.firstRaft > meta.lastRaft {
		return fmt.Errorf("raft index %d..%d goes backwards", meta.firstRaft, meta.lastRaft)
	}
	for i, e := range x.lsns {
		if e.lsn > last || e.pos < 0 || e.pos >= meta.size || e.raftIndex < meta.firstRaft || e.raftIndex > meta.lastRaft {
			return fmt.Errorf("lsn entry %d (lsn %d pos %d raft %d) outside the segment", i, e.lsn, e.pos, e.raftIndex)
		}
		if i > 0 {
			p := x.lsns[i-1]
			if e.lsn <= p.lsn || e.pos <= p.pos || e.raftIndex < p.raftIndex {
				return fmt.Errorf("lsn entry %d out of order", i)
			}
		}
	}
	for name, t := range x.topics {
		if t.first >= t.end || len(t.entries) == 0 || t.entries[0].offset != t.first {
			return fmt.Errorf("topic %q: bad range %d..%d", name, t.first, t.end)
		}
		for i, e := range t.entries {
			if e.offset >= t.end || e.lsn < meta.base || e.lsn > last || e.pos < 0 || e.pos >= meta.size {
				return fmt.Errorf("topic %q entry %d outside the segment", name, i)
			}
			if i > 0 {
				p := t.entries[i-1]
				if e.offset <= p.offset || e.lsn <= p.lsn || e.pos <= p.pos {
					return fmt.Errorf("topic %q entry %d out of order", name, i)
				}
			}
		}
	}
	return nil
}

// decoder reads little-endian fields and remembers the first short read.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.err = fmt.Errorf("short by %d bytes", n-len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) bytes(n int) []byte { return d.take(n) }

// count reads a u32 element count and rejects one that could not fit in the
// bytes left at minBytes each.
func (d *decoder) count(minBytes int) int {
	n := int(d.u32())
	if d.err == nil && n > len(d.b)/minBytes {
		d.err = fmt.Errorf("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return n
}
