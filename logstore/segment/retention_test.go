package segment

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// topicOracle is the naive answer to TopicOffsetLSN: every offset's LSN.
type topicOracle map[string][]types.LSN

func (o topicOracle) add(txns ...*logstorepb.Transaction) {
	for _, txn := range txns {
		for _, sl := range txn.Slices {
			for range sl.Messages {
				o[sl.Topic] = append(o[sl.Topic], types.LSN(txn.Lsn))
			}
		}
	}
}

// randomTopicsGen mixes a hot topic, warm ones and rare ones, with varying
// slice sizes, so topic indexes are sparse in different ways.
func randomTopicsGen(seed uint64) *gen {
	rng := rand.New(rand.NewPCG(seed, seed))
	g := newGen()
	g.topics = func(lsn uint64) []string {
		ts := []string{"hot"}
		if rng.IntN(4) == 0 {
			ts = append(ts, fmt.Sprintf("warm-%d", rng.IntN(3)))
		}
		if rng.IntN(60) == 0 {
			ts = append(ts, fmt.Sprintf("rare-%d", rng.IntN(2)))
		}
		g.msgs = 1 + rng.IntN(4)
		return ts
	}
	return g
}

func TestTopicOffsetLSNAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	l := mustOpen(t, o)
	oracle := topicOracle{}
	oracle.add(appendN(t, l, randomTopicsGen(1), 1500)...)
	if n := len(l.Segments()); n < 10 {
		t.Fatalf("only %d segments", n)
	}
	check := func(l *Log) {
		t.Helper()
		for topic, lsns := range oracle {
			for off, want := range lsns {
				got, err := l.TopicOffsetLSN(topic, types.Offset(off))
				if err != nil || got != want {
					t.Fatalf("TopicOffsetLSN(%q, %d) = %d, %v; want %d", topic, off, got, err, want)
				}
			}
			if _, err := l.TopicOffsetLSN(topic, types.Offset(len(lsns))); !errors.Is(err, ErrNotFound) {
				t.Fatalf("TopicOffsetLSN(%q, next offset %d): %v, want ErrNotFound", topic, len(lsns), err)
			}
		}
		if _, err := l.TopicOffsetLSN("nope", 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown topic: %v, want ErrNotFound", err)
		}
	}
	check(l)
	// The same answers from the persisted indexes after a restart.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check(mustOpen(t, o))
}

func TestDeleteBefore(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	l := mustOpen(t, o)
	g := newGen()
	g.perEntry = 1 // one txn per Raft entry, so a truncation can cut anywhere
	want := appendN(t, l, g, 500)
	segs := l.Segments()
	sizeBefore := l.SizeBytes()

	// A reader inside the first segment keeps reading it while it is
	// removed.
	var during []*logstorepb.Transaction
	removed := false
	err := l.Read(1, 0, func(txn *logstorepb.Transaction) (bool, error) {
		during = append(during, txn)
		if !removed {
			removed = true
			freed, err := l.DeleteBefore(segs[3].FirstLSN + 1)
			if err != nil {
				return false, err
			}
			var wantFreed int64
			for _, s := range segs[:3] {
				wantFreed += s.Bytes
			}
			if freed != wantFreed {
				return false, fmt.Errorf("freed %d bytes, want %d", freed, wantFreed)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameTxns(t, during, want)

	first := segs[3].FirstLSN
	if l.FirstLSN() != first || l.LastLSN() != 500 {
		t.Fatalf("after DeleteBefore first %d last %d, want %d 500", l.FirstLSN(), l.LastLSN(), first)
	}
	if l.SizeBytes() != sizeBefore-(segs[0].Bytes+segs[1].Bytes+segs[2].Bytes) {
		t.Fatalf("SizeBytes %d after freeing 3 segments of %d", l.SizeBytes(), sizeBefore)
	}
	for _, s := range segs[:3] {
		for _, name := range []string{s.Name, idxFileName(s.FirstLSN)} {
			if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s still exists: %v", name, err)
			}
		}
	}
	if _, err := l.Get(first - 1); !errors.Is(err, ErrBelowRetention) {
		t.Fatalf("Get below retention: %v", err)
	}
	if err := l.Read(1, 0, func(*logstorepb.Transaction) (bool, error) { return true, nil }); !errors.Is(err, ErrBelowRetention) {
		t.Fatalf("Read below retention: %v", err)
	}
	if _, err := l.TopicOffsetLSN("orders", 0); !errors.Is(err, ErrBelowRetention) {
		t.Fatalf("TopicOffsetLSN below retention: %v", err)
	}
	firstOrders := types.Offset(want[first-1].Slices[0].FirstOffset)
	if lsn, err := l.TopicOffsetLSN("orders", firstOrders); err != nil || lsn != first {
		t.Fatalf("TopicOffsetLSN(orders, %d) = %d, %v; want %d", firstOrders, lsn, err, first)
	}
	sameTxns(t, readAll(t, l, first, 0), want[first-1:])

	// Never the active segment, nor the one holding LastLSN.
	if _, err := l.DeleteBefore(1 << 60); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); len(got) != 1 || l.LastLSN() != 500 || l.LastRaftIndex() != want[499].RaftIndex {
		t.Fatalf("DeleteBefore(huge) left %+v, last %d raft %d", got, l.LastLSN(), l.LastRaftIndex())
	}
	// When the active segment is empty, the sealed one before it holds
	// LastLSN and stays. (Sealing happens before an append, so an empty
	// active segment comes from truncating at a segment's first record.)
	for len(l.Segments()) < 3 {
		want = append(want, appendN(t, l, g, 1)...)
	}
	active := l.Segments()[2]
	if _, err := l.TruncateAfterRaftIndex(want[active.FirstLSN-2].RaftIndex); err != nil {
		t.Fatal(err)
	}
	want = want[:active.FirstLSN-1]
	if got := l.Segments(); len(got) != 3 || got[2].LastLSN+1 != got[2].FirstLSN {
		t.Fatalf("truncating at a segment's first record left %+v", got)
	}
	if _, err := l.DeleteBefore(1 << 60); err != nil {
		t.Fatal(err)
	}
	if got := l.Segments(); len(got) != 2 || l.LastLSN() != got[0].LastLSN || l.LastRaftIndex() != want[len(want)-1].RaftIndex {
		t.Fatalf("DeleteBefore removed the segment holding LastLSN: %+v", got)
	}
	// Retention survives a restart.
	first = l.FirstLSN()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, o)
	if l.FirstLSN() != first {
		t.Fatalf("reopened with first %d, want %d", l.FirstLSN(), first)
	}
	sameTxns(t, readAll(t, l, first, 0), want[first-1:])
}

func TestTruncateAfterRaftIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cut picks the Raft index to truncate after, given the log's
		// transactions and segments.
		cut func(want []*logstorepb.Transaction, segs []SegmentInfo) uint64
	}{
		{"inside the active segment", func(want []*logstorepb.Transaction, segs []SegmentInfo) uint64 {
			return want[segs[len(segs)-1].FirstLSN+1].RaftIndex
		}},
		{"inside a sealed segment", func(want []*logstorepb.Transaction, segs []SegmentInfo) uint64 {
			return want[segs[2].FirstLSN+4].RaftIndex
		}},
		{"at a segment's first record", func(want []*logstorepb.Transaction, segs []SegmentInfo) uint64 {
			return want[segs[2].FirstLSN-2].RaftIndex // keeps segment 1 whole, all of segment 2 goes
		}},
		{"everything", func([]*logstorepb.Transaction, []SegmentInfo) uint64 { return 0 }},
		{"nothing", func(want []*logstorepb.Transaction, _ []SegmentInfo) uint64 {
			return want[len(want)-1].RaftIndex
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOptions(dir)
			l := mustOpen(t, o)
			want := appendN(t, l, newGen(), 400)
			segs := l.Segments()
			idx := tc.cut(want, segs)
			keep := 0
			for keep < len(want) && want[keep].RaftIndex <= idx {
				keep++
			}
			// A reader that fixed its range before the truncation still
			// reads the records it was promised.
			var old []*logstorepb.Transaction
			truncated := false
			err := l.Read(1, 0, func(txn *logstorepb.Transaction) (bool, error) {
				old = append(old, txn)
				if !truncated {
					truncated = true
					n, err := l.TruncateAfterRaftIndex(idx)
					if err != nil {
						return false, err
					}
					if n != len(want)-keep {
						return false, fmt.Errorf("dropped %d, want %d", n, len(want)-keep)
					}
				}
				return true, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sameTxns(t, old, want)

			check := func(l *Log) {
				t.Helper()
				if l.LastLSN() != types.LSN(keep) {
					t.Fatalf("LastLSN %d, want %d", l.LastLSN(), keep)
				}
				wantRaft := uint64(0)
				if keep > 0 {
					wantRaft = want[keep-1].RaftIndex
				}
				if l.LastRaftIndex() != wantRaft {
					t.Fatalf("LastRaftIndex %d, want %d", l.LastRaftIndex(), wantRaft)
				}
				sameTxns(t, readAll(t, l, 1, 0), want[:keep])
				if _, err := l.Get(types.LSN(keep) + 1); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get(%d) after truncation: %v", keep+1, err)
				}
			}
			check(l)
			if st := l.Stats(); st.TruncatedRecords != uint64(len(want)-keep) {
				t.Fatalf("Stats().TruncatedRecords = %d, dropped %d", st.TruncatedRecords, len(want)-keep)
			}
			// Raft applies the same entries again: the same records.
			again := appendN(t, l, genAfter(keep), len(want)-keep)
			sameTxns(t, again, want[keep:])
			sameTxns(t, readAll(t, l, 1, 0), want)
			if got := l.Segments(); len(got) != len(segs) {
				t.Fatalf("re-applying made %d segments, first time %d", len(got), len(segs))
			}
			for i, s := range l.Segments() {
				if s != segs[i] {
					t.Fatalf("segment %d is %+v after re-applying, was %+v", i, s, segs[i])
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, o)
			sameTxns(t, readAll(t, l, 1, 0), want)
			n, err := l.TruncateAfterRaftIndex(idx)
			if err != nil || n != len(want)-keep {
				t.Fatalf("second truncation dropped %d, %v", n, err)
			}
			if st := l.Stats(); st.TruncatedRecords != uint64(n) {
				t.Fatalf("Stats().TruncatedRecords = %d after reopening and dropping %d", st.TruncatedRecords, n)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			check(mustOpen(t, o))
		})
	}
}
