package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Record framing. A segment file is a plain sequence of records, nothing else
// (no file header); all integers are little-endian:
//
//	offset 0  length  uint32  payload length in bytes, 1..MaxRecordBytes
//	offset 4  crc     uint32  CRC-32C (Castagnoli) of the payload bytes
//	offset 8  payload         proto.MarshalOptions{Deterministic: true} of
//	                          one logstorepb.Transaction (LSN >= 1)
//
// A zero length is rejected (a zero-filled tail is corruption, not an empty
// record), and so is a length above MaxRecordBytes, before anything is
// allocated for it.
const (
	headerBytes = 8
	// MaxRecordBytes bounds one record's payload. Far above any request the
	// LogStore accepts (gRPC's default message limit is 4 MiB); it exists so
	// a corrupt length field cannot make a reader allocate gigabytes.
	MaxRecordBytes = 64 << 20
)

var (
	crcTable = crc32.MakeTable(crc32.Castagnoli)
	// marshalOpts makes every replica write the same bytes for the same
	// transaction (segment logs end byte-identical across nodes).
	marshalOpts = proto.MarshalOptions{Deterministic: true}
)

// errTruncated marks a record whose header or payload runs past the end of
// the bytes available: a torn tail in the active segment, corruption
// anywhere else.
var errTruncated = errors.New("record truncated")

// appendRecord appends the framed record of txn to dst and returns the
// extended slice.
func appendRecord(dst []byte, txn *logstorepb.Transaction) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, headerBytes)...)
	dst, err := marshalOpts.MarshalAppend(dst, txn)
	if err != nil {
		return dst[:start], fmt.Errorf("segment: encode lsn %d: %w", txn.GetLsn(), err)
	}
	n := len(dst) - start - headerBytes
	if n == 0 || n > MaxRecordBytes {
		return dst[:start], fmt.Errorf("segment: lsn %d encodes to %d bytes, limit 1..%d", txn.GetLsn(), n, MaxRecordBytes)
	}
	payload := dst[start+headerBytes:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(n))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, crcTable))
	return dst, nil
}

// parseHeader returns the payload length and CRC of a record header.
func parseHeader(h []byte) (n int, crc uint32, err error) {
	if len(h) < headerBytes {
		return 0, 0, errTruncated
	}
	length := binary.LittleEndian.Uint32(h)
	if length == 0 || length > MaxRecordBytes {
		return 0, 0, fmt.Errorf("%w: record length %d outside 1..%d", ErrCorrupt, length, MaxRecordBytes)
	}
	return int(length), binary.LittleEndian.Uint32(h[4:]), nil
}

// checkPayload verifies a payload against the CRC from its header.
func checkPayload(payload []byte, crc uint32) error {
	if got := crc32.Checksum(payload, crcTable); got != crc {
		return fmt.Errorf("%w: crc 0x%08x, header says 0x%08x", ErrCorrupt, got, crc)
	}
	return nil
}

// splitRecord checks the record at the start of b and returns its payload and
// its whole framed length. Errors wrap ErrCorrupt or errTruncated.
func splitRecord(b []byte) (payload []byte, n int, err error) {
	size, crc, err := parseHeader(b)
	if err != nil {
		return nil, 0, err
	}
	if len(b)-headerBytes < size {
		return nil, 0, errTruncated
	}
	payload = b[headerBytes : headerBytes+size]
	if err := checkPayload(payload, crc); err != nil {
		return nil, 0, err
	}
	return payload, headerBytes + size, nil
}

// decodeRecord decodes the record at the start of b: it returns the
// transaction and the record's framed length. It never panics; corruption
// (bad length, CRC mismatch, undecodable payload, LSN 0) wraps ErrCorrupt, a
// record cut short wraps errTruncated.
func decodeRecord(b []byte) (*logstorepb.Transaction, int, error) {
	payload, n, err := splitRecord(b)
	if err != nil {
		return nil, 0, err
	}
	txn, err := unmarshalPayload(payload)
	if err != nil {
		return nil, 0, err
	}
	return txn, n, nil
}

// unmarshalPayload decodes a CRC-checked payload.
func unmarshalPayload(payload []byte) (*logstorepb.Transaction, error) {
	txn := new(logstorepb.Transaction)
	if err := proto.Unmarshal(payload, txn); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrCorrupt, err)
	}
	if txn.Lsn == 0 {
		return nil, fmt.Errorf("%w: payload has lsn 0", ErrCorrupt)
	}
	return txn, nil
}

// recordMeta is what the indexes need from a record, parsed straight from the
// wire bytes (no allocation but the slices buffer, reused by the caller).
type recordMeta struct {
	lsn       types.LSN
	raftIndex uint64
	timestamp int64
	slices    []sliceMeta
}

// sliceMeta describes one slice of a record; topic aliases the payload.
type sliceMeta struct {
	topic       []byte
	firstOffset types.Offset
	messages    uint64
}

// Field numbers of logstorepb.Transaction and logstorepb.TxnSlice read by
// parseMeta (kept in step with proto/logstore.proto; TestParseMetaMatches
// checks them against proto.Unmarshal).
const (
	txnFieldLSN       = 1
	txnFieldRaftIndex = 2
	txnFieldTimestamp = 3
	txnFieldSlices    = 4

	sliceFieldTopic       = 1
	sliceFieldFirstOffset = 2
	sliceFieldMessages    = 3
)

// parseMeta reads a CRC-checked payload's LSN, Raft index, timestamp and slice
// ranges into m (reusing m.slices). It is the cheap twin of unmarshalPayload
// for scans that only need the index keys.
func parseMeta(payload []byte, m *recordMeta) error {
	*m = recordMeta{slices: m.slices[:0]}
	b := payload
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: payload tag: %v", ErrCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == txnFieldLSN && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			m.lsn = types.LSN(v)
		case num == txnFieldRaftIndex && typ == protowire.VarintType:
			m.raftIndex, n = protowire.ConsumeVarint(b)
		case num == txnFieldTimestamp && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			m.timestamp = int64(v)
		case num == txnFieldSlices && typ == protowire.BytesType:
			var sb []byte
			sb, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				s, err := parseSliceMeta(sb)
				if err != nil {
					return err
				}
				m.slices = append(m.slices, s)
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: payload field %d: %v", ErrCorrupt, num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	if m.lsn == 0 {
		return fmt.Errorf("%w: payload has lsn 0", ErrCorrupt)
	}
	return nil
}

// peekLSN reads the LSN of a CRC-checked payload from its first field, where
// deterministic encoding puts it (ok false otherwise: use parseMeta).
func peekLSN(payload []byte) (lsn types.LSN, ok bool) {
	num, typ, n := protowire.ConsumeTag(payload)
	if n < 0 || num != txnFieldLSN || typ != protowire.VarintType {
		return 0, false
	}
	v, n2 := protowire.ConsumeVarint(payload[n:])
	return types.LSN(v), n2 > 0
}

func parseSliceMeta(b []byte) (sliceMeta, error) {
	var s sliceMeta
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, fmt.Errorf("%w: slice tag: %v", ErrCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == sliceFieldTopic && typ == protowire.BytesType:
			s.topic, n = protowire.ConsumeBytes(b)
		case num == sliceFieldFirstOffset && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			s.firstOffset = types.Offset(v)
		case num == sliceFieldMessages && typ == protowire.BytesType:
			_, n = protowire.ConsumeBytes(b)
			s.messages++
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return s, fmt.Errorf("%w: slice field %d: %v", ErrCorrupt, num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return s, nil
}

// recordReader reads consecutive records of one file from pos up to end
// through ReadAt (so it holds no file offset and no lock). Records it returns
// have a checked CRC.
type recordReader struct {
	r   io.ReaderAt
	pos int64 // where the next record starts
	end int64 // records end here (exclusive)
	buf []byte
	// chunk is a window of the file read ahead: the bytes at [chunkAt,
	// chunkAt+len(chunk)).
	chunk   []byte
	chunkAt int64
	pooled  *[readAheadBytes]byte // buf's array when it came from readBufs
}

// readAheadBytes is how much a recordReader asks of the file at once: large
// enough that a scan costs few syscalls, small enough to keep per reader.
const readAheadBytes = 64 << 10

// readBufs recycles read-ahead buffers: a stream of short reads (a Get, a
// tailing reader) would otherwise allocate one per call.
var readBufs = sync.Pool{New: func() any { return new([readAheadBytes]byte) }}

func newRecordReader(r io.ReaderAt, pos, end int64) *recordReader {
	rr := &recordReader{r: r, pos: pos, end: end}
	if end-pos >= readAheadBytes/4 {
		rr.pooled = readBufs.Get().(*[readAheadBytes]byte)
		rr.buf = rr.pooled[:]
	}
	return rr
}

// close returns the reader's buffer to the pool; the reader and the frames it
// returned must not be used afterwards.
func (rr *recordReader) close() {
	if rr.pooled != nil {
		readBufs.Put(rr.pooled)
		rr.pooled, rr.buf, rr.chunk = nil, nil, nil
	}
}

// next returns the next record's frame (header and payload, valid until the
// next call), its position, and its payload. It returns io.EOF exactly at
// end; a record that runs past end wraps errTruncated, a bad one ErrCorrupt.
func (rr *recordReader) next() (frame []byte, at int64, err error) {
	at = rr.pos
	if at >= rr.end {
		return nil, at, io.EOF
	}
	h, err := rr.window(at, headerBytes)
	if err != nil {
		return nil, at, err
	}
	size, crc, err := parseHeader(h)
	if err != nil {
		return nil, at, err
	}
	frame, err = rr.window(at, headerBytes+size)
	if err != nil {
		return nil, at, err
	}
	if err := checkPayload(frame[headerBytes:], crc); err != nil {
		return nil, at, err
	}
	rr.pos = at + int64(len(frame))
	return frame, at, nil
}

// window returns n bytes of the file at off, from the read-ahead chunk when
// it holds them.
func (rr *recordReader) window(off int64, n int) ([]byte, error) {
	if off+int64(n) > rr.end {
		return nil, errTruncated
	}
	if off >= rr.chunkAt && off+int64(n) <= rr.chunkAt+int64(len(rr.chunk)) {
		i := off - rr.chunkAt
		return rr.chunk[i : i+int64(n)], nil
	}
	want := max(n, readAheadBytes)
	want = int(min(int64(want), rr.end-off))
	if cap(rr.buf) < want {
		rr.buf = make([]byte, want)
	}
	b := rr.buf[:want]
	got, err := rr.r.ReadAt(b, off)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = errTruncated
		}
		rr.chunk = nil
		return nil, err
	}
	rr.chunk, rr.chunkAt = b[:got], off
	return rr.chunk[:n], nil
}
