package segment

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// AppendBatch writes the same files as Append one record at a time, with
// batches that cross segment seals, and the records read back the same.
func TestAppendBatchMatchesAppend(t *testing.T) {
	one, batched := testOptions(t.TempDir()), testOptions(t.TempDir())
	lo, lb := mustOpen(t, one), mustOpen(t, batched)
	g := newGen()
	var all []*logstorepb.Transaction
	// Batch sizes from 1 up to larger than a segment (16 KiB of ~300-byte
	// records), so chunks end at seals in every position.
	for _, n := range []int{1, 2, 3, 7, 1, 40, 64, 5, 120, 1, 33} {
		var batch []*logstorepb.Transaction
		for range n {
			txn := g.txn()
			if err := lo.Append(txn); err != nil {
				t.Fatal(err)
			}
			batch = append(batch, proto.Clone(txn).(*logstorepb.Transaction))
		}
		if err := lb.AppendBatch(batch); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
		if lb.LastLSN() != types.LSN(all[len(all)-1].Lsn) || lb.LastRaftIndex() != all[len(all)-1].RaftIndex {
			t.Fatalf("after %d records: last lsn %d raft %d", len(all), lb.LastLSN(), lb.LastRaftIndex())
		}
	}
	if lb.Stats().Seals < 5 {
		t.Fatalf("only %d seals: the test must cross segments", lb.Stats().Seals)
	}
	sameTxns(t, readAll(t, lb, 1, 0), all)
	entries, err := os.ReadDir(one.Dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadDir(batched.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(other) {
		t.Fatalf("%d files written one by one, %d batched", len(entries), len(other))
	}
	for _, e := range entries {
		x, err := os.ReadFile(filepath.Join(one.Dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(batched.Dir, e.Name()))
		if err != nil || !bytes.Equal(x, y) {
			t.Fatalf("%s differs (%v)", e.Name(), err)
		}
	}
	// Reopening finds the same log.
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	re := mustOpen(t, batched)
	sameTxns(t, readAll(t, re, 1, 0), all)
}

// A record that does not continue the log panics and leaves the records
// before it appended and nothing after them, on disk too.
func TestAppendBatchRejectsGap(t *testing.T) {
	o := testOptions(t.TempDir())
	l := mustOpen(t, o)
	g := newGen()
	first := appendN(t, l, g, 3)
	good := []*logstorepb.Transaction{g.txn(), g.txn()}
	bad := g.txn()
	bad.Lsn++ // a gap
	msg := mustPanic(t, func() { _ = l.AppendBatch(append(good, bad)) })
	if !strings.Contains(msg, "lsn") {
		t.Fatalf("panic %q does not name the lsn", msg)
	}
	want := append(first, good...)
	if l.LastLSN() != 5 {
		t.Fatalf("last lsn %d after the panic, want 5", l.LastLSN())
	}
	sameTxns(t, readAll(t, l, 1, 0), want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	sameTxns(t, readAll(t, mustOpen(t, o), 1, 0), want)
}

// An offset that does not continue its topic within the batch panics too.
func TestAppendBatchRejectsOffsetGapInBatch(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	g := newGen()
	a, b := g.txn(), g.txn()
	b.Slices[0].FirstOffset += 1
	mustPanic(t, func() { _ = l.AppendBatch([]*logstorepb.Transaction{a, b}) })
	if l.LastLSN() != 1 {
		t.Fatalf("last lsn %d, want 1 (the record before the bad one)", l.LastLSN())
	}
}

func TestAppendBatchEdges(t *testing.T) {
	l := mustOpen(t, testOptions(t.TempDir()))
	if err := l.AppendBatch(nil); err != nil || l.LastLSN() != 0 {
		t.Fatalf("empty batch: %v, last lsn %d", err, l.LastLSN())
	}
	// A record that cannot be encoded (over MaxRecordBytes) is an error and
	// appends nothing of its chunk.
	g := newGen()
	a, big := g.txn(), g.txn()
	big.Slices[0].Messages[0].Value = make([]byte, MaxRecordBytes)
	if err := l.AppendBatch([]*logstorepb.Transaction{a, big}); err == nil || l.LastLSN() != 0 {
		t.Fatalf("oversize record: %v, last lsn %d", err, l.LastLSN())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendBatch([]*logstorepb.Transaction{a}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
