package segment

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// FuzzDecodeRecord: the record decoder never panics; what it accepts, the
// cheap index parser reads the same way (LSN, Raft index, timestamp, slice
// ranges); and a good record with one bit flipped anywhere is rejected.
func FuzzDecodeRecord(f *testing.F) {
	g := newGen()
	for range 4 {
		frame, err := appendRecord(nil, g.txn())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame, uint32(0))
		f.Add(frame[:len(frame)-1], uint32(77))
		f.Add(append(frame, 0, 0, 0, 0), uint32(5))
	}
	f.Add([]byte{}, uint32(1))
	f.Add(make([]byte, 16), uint32(3))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, uint32(9))
	f.Fuzz(func(t *testing.T, data []byte, bit uint32) {
		// As given.
		if txn, n, err := decodeRecord(data); err == nil {
			if n > len(data) || n < headerBytes {
				t.Fatalf("decoded %d bytes of %d", n, len(data))
			}
			var m recordMeta
			if err := parseMeta(data[headerBytes:n], &m); err != nil {
				t.Fatalf("decodeRecord accepted what parseMeta rejects: %v", err)
			}
			sameMeta(t, &m, txn)
			// On what Append writes (canonical encoding), peekLSN agrees.
			if canon, err := marshalOpts.Marshal(txn); err == nil && bytes.Equal(canon, data[headerBytes:n]) {
				if lsn, ok := peekLSN(canon); !ok || lsn != types.LSN(txn.Lsn) {
					t.Fatalf("peekLSN %d %v, proto.Unmarshal %d", lsn, ok, txn.Lsn)
				}
			}
		} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, errTruncated) {
			t.Fatalf("error %v is neither ErrCorrupt nor truncation", err)
		}

		// As the payload of a good record, then damaged.
		txn := &logstorepb.Transaction{
			Lsn: uint64(len(data)) + 1, RaftIndex: uint64(bit), TimestampUnixNano: -int64(bit),
			Slices: []*logstorepb.TxnSlice{{Topic: "t", FirstOffset: uint64(bit), Messages: []*logstorepb.Message{{Value: data, Key: data}}}},
		}
		frame, err := appendRecord(nil, txn)
		if err != nil {
			t.Fatal(err)
		}
		got, n, err := decodeRecord(frame)
		if err != nil || n != len(frame) || !proto.Equal(got, txn) {
			t.Fatalf("good record: %v, %d of %d bytes, equal %v", err, n, len(frame), proto.Equal(got, txn))
		}
		if lsn, ok := peekLSN(frame[headerBytes:]); !ok || lsn != types.LSN(txn.Lsn) {
			t.Fatalf("peekLSN of a good record: %d %v, want %d", lsn, ok, txn.Lsn)
		}
		i := int(bit % uint32(len(frame)*8))
		frame[i/8] ^= 1 << (i % 8)
		if _, _, err := decodeRecord(frame); err == nil {
			t.Fatalf("record with bit %d flipped was accepted", i)
		}
	})
}

// sameMeta fails unless m holds txn's index keys.
func sameMeta(t *testing.T, m *recordMeta, txn *logstorepb.Transaction) {
	t.Helper()
	if m.lsn != types.LSN(txn.Lsn) || m.raftIndex != txn.RaftIndex || m.timestamp != txn.TimestampUnixNano || len(m.slices) != len(txn.Slices) {
		t.Fatalf("parseMeta %+v disagrees with proto.Unmarshal %v", m, txn)
	}
	for i, sl := range txn.Slices {
		ms := m.slices[i]
		if string(ms.topic) != sl.Topic || ms.firstOffset != types.Offset(sl.FirstOffset) || ms.messages != uint64(len(sl.Messages)) {
			t.Fatalf("slice %d: parseMeta %q %d %d, proto %q %d %d", i, ms.topic, ms.firstOffset, ms.messages, sl.Topic, sl.FirstOffset, len(sl.Messages))
		}
	}
}

func TestParseMetaMatches(t *testing.T) {
	g := randomTopicsGen(3)
	for range 200 {
		txn := g.txn()
		txn.OffsetCommits = []*logstorepb.OffsetCommit{{Group: "g", Topic: "t", Offset: 9}}
		frame, err := appendRecord(nil, txn)
		if err != nil {
			t.Fatal(err)
		}
		var m recordMeta
		if err := parseMeta(frame[headerBytes:], &m); err != nil {
			t.Fatal(err)
		}
		sameMeta(t, &m, txn)
	}
}

// FuzzUnmarshalIndex: the index decoder never panics, and what it accepts is
// canonical (encodes back to the same bytes) and passes checkIndex.
func FuzzUnmarshalIndex(f *testing.F) {
	o := testOptions(f.TempDir())
	l, err := Open(o)
	if err != nil {
		f.Fatal(err)
	}
	appendN(f, l, randomTopicsGen(5), 300)
	for _, s := range l.Segments()[:3] {
		b, err := os.ReadFile(filepath.Join(o.Dir, idxFileName(s.FirstLSN)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	_ = l.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		meta, x, err := unmarshalIndex(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if err := checkIndex(meta, &x); err != nil {
			t.Fatal(err)
		}
		if again := marshalIndex(meta, &x); !bytes.Equal(again, b) {
			t.Fatalf("accepted index does not encode back to its bytes")
		}
	})
}

// damageBase is the active segment file FuzzOpenDamagedActive damages: the
// bytes, the records in it and where each ends.
var damageBase = sync.OnceValues(func() (struct {
	file []byte
	txns []*logstorepb.Transaction
	ends []int64
}, error) {
	var b struct {
		file []byte
		txns []*logstorepb.Transaction
		ends []int64
	}
	g := randomTopicsGen(9)
	for range 30 {
		txn := g.txn()
		frame, err := appendRecord(nil, txn)
		if err != nil {
			return b, err
		}
		b.file = append(b.file, frame...)
		b.txns = append(b.txns, txn)
		b.ends = append(b.ends, int64(len(b.file)))
	}
	return b, nil
})

// FuzzOpenDamagedActive is the property of recovery: however the active
// segment is cut, bit-flipped, overwritten or extended, Open returns a
// prefix of the records written (never a record that was not written, never
// one out of order), keeps every record that lies wholly before the first
// damaged byte, and Append continues after it. The seed corpus (random
// damage from fixed seeds) runs with every go test.
func FuzzOpenDamagedActive(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		f.Add(uint8(rng.IntN(4)), rng.Uint32(), rng.Uint32(), rng.Uint64())
	}
	f.Fuzz(func(t *testing.T, kind uint8, at, n uint32, seed uint64) {
		base, err := damageBase()
		if err != nil {
			t.Fatal(err)
		}
		file := bytes.Clone(base.file)
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		pos := int(at % uint32(len(file)+1))
		switch kind % 4 {
		case 0: // cut
			file = file[:pos]
		case 1: // flip 1..3 bits from pos on
			for range 1 + n%3 {
				i := min(pos+rng.IntN(64), len(file)-1)
				file[i] ^= 1 << rng.IntN(8)
			}
		case 2: // overwrite a run with random bytes
			for i := pos; i < min(pos+1+int(n%64), len(file)); i++ {
				file[i] = byte(rng.Uint32())
			}
		case 3: // random garbage appended
			extra := make([]byte, n%100)
			for i := range extra {
				extra[i] = byte(rng.Uint32())
			}
			file = append(file, extra...)
		}
		firstDiff := int64(min(len(file), len(base.file)))
		for i := range firstDiff {
			if file[i] != base.file[i] {
				firstDiff = i
				break
			}
		}
		intact := 0
		for intact < len(base.ends) && base.ends[intact] <= firstDiff {
			intact++
		}

		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segFileName(1)), file, 0o644); err != nil {
			t.Fatal(err)
		}
		o := testOptions(dir)
		o.SegmentBytes = 1 << 20
		l, err := Open(o)
		if err != nil {
			t.Fatalf("Open of a damaged active segment: %v", err)
		}
		defer l.Close()
		got := readAll(t, l, 1, 0)
		if len(got) < intact || len(got) > len(base.txns) {
			t.Fatalf("recovered %d records; %d were intact, %d written", len(got), intact, len(base.txns))
		}
		sameTxns(t, got, base.txns[:len(got)])
		g := randomTopicsGen(9)
		for range len(got) {
			g.txn()
		}
		next := g.txn()
		if err := l.Append(next); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Get(types.LSN(next.Lsn)); err != nil || !proto.Equal(got, next) {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}
