package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

func TestEmptyLog(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	if l.FirstLSN() != 1 || l.LastLSN() != 0 || l.LastRaftIndex() != 0 {
		t.Fatalf("empty log: first %d last %d raft %d, want 1 0 0", l.FirstLSN(), l.LastLSN(), l.LastRaftIndex())
	}
	if _, err := l.Get(1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(1) on an empty log: %v, want ErrNotFound", err)
	}
	if got := readAll(t, l, 1, 0); len(got) != 0 {
		t.Fatalf("Read on an empty log returned %d records", len(got))
	}
	if _, err := l.TopicOffsetLSN("orders", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TopicOffsetLSN on an empty log: %v, want ErrNotFound", err)
	}
}

func TestRoundTrip(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	g := newGen()
	want := appendN(t, l, g, 300)
	if l.LastLSN() != 300 || l.LastRaftIndex() != want[299].RaftIndex {
		t.Fatalf("last lsn %d raft %d, want 300 %d", l.LastLSN(), l.LastRaftIndex(), want[299].RaftIndex)
	}
	for _, w := range want {
		got, err := l.Get(types.LSN(w.Lsn))
		if err != nil {
			t.Fatalf("Get(%d): %v", w.Lsn, err)
		}
		if !proto.Equal(got, w) {
			t.Fatalf("Get(%d) = %v, want %v", w.Lsn, got, w)
		}
	}
	sameTxns(t, readAll(t, l, 1, 0), want)
	sameTxns(t, readAll(t, l, 17, 250), want[16:250])
	sameTxns(t, readAll(t, l, 290, 1000), want[289:])
	if got := readAll(t, l, 301, 0); len(got) != 0 {
		t.Fatalf("Read past the end returned %d records", len(got))
	}
	if _, err := l.Get(301); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(301): %v, want ErrNotFound", err)
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("300 records of ~%d bytes in 16 KiB segments made only %d segments", proto.Size(want[0]), len(segs))
	}
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	st := l.Stats()
	if st.Segments != len(segs) || st.Seals != uint64(len(segs)-1) || st.Bytes != total || l.SizeBytes() != total ||
		st.FirstLSN != 1 || st.LastLSN != 300 || st.TruncatedBytes != 0 {
		t.Fatalf("Stats %+v disagree with %d segments of %d bytes", st, len(segs), total)
	}
}

func TestReadStopsEarly(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	appendN(t, l, newGen(), 50)
	n := 0
	err := l.Read(10, 0, func(txn *logstorepb.Transaction) (bool, error) {
		n++
		return txn.Lsn < 14, nil
	})
	if err != nil || n != 5 {
		t.Fatalf("Read stopping at lsn 14: %d calls, %v; want 5, nil", n, err)
	}
	stop := errors.New("stop")
	n = 0
	err = l.Read(10, 0, func(txn *logstorepb.Transaction) (bool, error) {
		n++
		return true, stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Read with fn error: %d calls, %v; want 1, stop", n, err)
	}
}

func TestAppendPanicsOnProgrammerErrors(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	g := newGen()
	appendN(t, l, g, 5)
	gap := &logstorepb.Transaction{Lsn: 7, RaftIndex: 9}
	if msg := mustPanic(t, func() { _ = l.Append(gap) }); !strings.Contains(msg, "lsn 7, want 6") {
		t.Fatalf("LSN gap panic %q does not name the numbers", msg)
	}
	back := &logstorepb.Transaction{Lsn: 6, RaftIndex: 1}
	if msg := mustPanic(t, func() { _ = l.Append(back) }); !strings.Contains(msg, "raft index 1 below the last 2") {
		t.Fatalf("raft index panic %q does not name the numbers", msg)
	}
	sparse := &logstorepb.Transaction{Lsn: 6, RaftIndex: 9, Slices: []*logstorepb.TxnSlice{
		{Topic: "orders", FirstOffset: 99, Messages: []*logstorepb.Message{{Value: []byte("x")}}},
	}}
	if msg := mustPanic(t, func() { _ = l.Append(sparse) }); !strings.Contains(msg, "offset 99, want 10") {
		t.Fatalf("sparse offset panic %q does not name the numbers", msg)
	}
	twice := &logstorepb.Transaction{Lsn: 6, RaftIndex: 9, Slices: []*logstorepb.TxnSlice{
		{Topic: "new", Messages: []*logstorepb.Message{{Value: []byte("x")}}},
		{Topic: "new", FirstOffset: 1, Messages: []*logstorepb.Message{{Value: []byte("y")}}},
	}}
	if msg := mustPanic(t, func() { _ = l.Append(twice) }); !strings.Contains(msg, `"new" twice`) {
		t.Fatalf("repeated topic panic %q", msg)
	}
	many := &logstorepb.Transaction{Lsn: 6, RaftIndex: 9}
	for i := range 40 {
		many.Slices = append(many.Slices, &logstorepb.TxnSlice{Topic: fmt.Sprint("t", i%39), FirstOffset: uint64(i / 39), Messages: []*logstorepb.Message{{}}})
	}
	if msg := mustPanic(t, func() { _ = l.Append(many) }); !strings.Contains(msg, `"t0" twice`) {
		t.Fatalf("repeated topic among many panic %q", msg)
	}
	if l.LastLSN() != 5 {
		t.Fatalf("after refused appends last lsn is %d, want 5", l.LastLSN())
	}
	appendN(t, l, g, 1) // the log is still usable
}

func TestReopenAfterClose(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, testOptions(dir))
	g := newGen()
	want := appendN(t, l, g, 200)
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(&logstorepb.Transaction{Lsn: 201, RaftIndex: want[199].RaftIndex}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if _, err := l.Get(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	l = mustOpen(t, testOptions(dir))
	if l.FirstLSN() != 1 || l.LastLSN() != 200 || l.LastRaftIndex() != want[199].RaftIndex {
		t.Fatalf("reopened: first %d last %d raft %d", l.FirstLSN(), l.LastLSN(), l.LastRaftIndex())
	}
	if got := l.Segments(); len(got) != len(segs) {
		t.Fatalf("reopened with %d segments, had %d", len(got), len(segs))
	}
	for i, s := range l.Segments() {
		if s != segs[i] {
			t.Fatalf("segment %d reopened as %+v, was %+v", i, s, segs[i])
		}
	}
	sameTxns(t, readAll(t, l, 1, 0), want)
	want = append(want, appendN(t, l, g, 100)...)
	sameTxns(t, readAll(t, l, 1, 0), want)
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{},
		{Dir: t.TempDir(), SegmentBytes: -1},
		{Dir: t.TempDir(), IndexIntervalBytes: -1},
		{Dir: t.TempDir(), TopicIndexIntervalBytes: -1},
		{Dir: t.TempDir(), WritebackBytes: -1},
	} {
		if l, err := Open(o); err == nil {
			l.Close()
			t.Fatalf("Open(%+v) accepted bad options", o)
		}
	}
	o := Options{Dir: filepath.Join(t.TempDir(), "new", "dir")}
	l := mustOpen(t, o)
	if l.opts.SegmentBytes != DefaultSegmentBytes || l.opts.IndexIntervalBytes != DefaultIndexIntervalBytes ||
		l.opts.TopicIndexIntervalBytes != DefaultTopicIndexIntervalBytes || l.opts.WritebackBytes != DefaultWritebackBytes || l.opts.Logger == nil {
		t.Fatalf("defaults not filled: %+v", l.opts)
	}
}

// TestReplicasWriteIdenticalFiles: two logs given the same transactions (as
// replicas applying the same Raft entries) hold byte-identical segment and
// index files, whatever the order topics were first seen in.
func TestReplicasWriteIdenticalFiles(t *testing.T) {
	a, b := testOptions(t.TempDir()), testOptions(t.TempDir())
	la, lb := mustOpen(t, a), mustOpen(t, b)
	g := randomTopicsGen(11)
	for range 600 {
		txn := g.txn()
		if err := la.Append(txn); err != nil {
			t.Fatal(err)
		}
		// The other replica decodes the entry itself: a separate copy.
		if err := lb.Append(proto.Clone(txn).(*logstorepb.Transaction)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	idx := 0
	for _, e := range entries {
		x, err := os.ReadFile(filepath.Join(a.Dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b.Dir, e.Name()))
		if err != nil || !bytes.Equal(x, y) {
			t.Fatalf("%s differs between replicas (%v)", e.Name(), err)
		}
		if strings.HasSuffix(e.Name(), idxExt) {
			idx++
		}
	}
	if idx < 5 {
		t.Fatalf("only %d index files compared", idx)
	}
}
