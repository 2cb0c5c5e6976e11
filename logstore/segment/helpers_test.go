package segment

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// quietLogger drops log output (tests that check a log line use their own).
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testOptions are small enough that tests roll many segments.
func testOptions(dir string) Options {
	return Options{
		Dir:                     dir,
		SegmentBytes:            16 << 10,
		IndexIntervalBytes:      1 << 10,
		TopicIndexIntervalBytes: 2 << 10,
		VerifyWrites:            true,
		Logger:                  quietLogger,
	}
}

func mustOpen(t testing.TB, o Options) *Log {
	t.Helper()
	l, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%s): %v", o.Dir, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// gen makes a valid stream of transactions: dense LSNs, Raft indexes that
// advance every perEntry transactions (several txns share one Raft entry),
// dense per-topic offsets, content derived from the LSN.
type gen struct {
	lsn, raft uint64
	perEntry  uint64
	next      map[string]uint64
	// topics picks the topics of transaction lsn.
	topics    func(lsn uint64) []string
	msgs      int // messages per slice
	valueSize int
}

func newGen() *gen {
	return &gen{
		perEntry: 3,
		next:     map[string]uint64{},
		topics: func(lsn uint64) []string {
			return []string{"orders", fmt.Sprintf("shard-%d", lsn%5)}
		},
		msgs:      2,
		valueSize: 64,
	}
}

// continueFrom makes g continue after a log ending with transaction last.
func (g *gen) continueFrom(last *logstorepb.Transaction) {
	g.lsn, g.raft = last.Lsn, last.RaftIndex
}

func (g *gen) txn() *logstorepb.Transaction {
	g.lsn++
	if (g.lsn-1)%g.perEntry == 0 {
		g.raft++
	}
	txn := &logstorepb.Transaction{Lsn: g.lsn, RaftIndex: g.raft, TimestampUnixNano: int64(g.lsn) * 1000}
	for _, topic := range g.topics(g.lsn) {
		sl := &logstorepb.TxnSlice{Topic: topic, FirstOffset: g.next[topic]}
		for i := range g.msgs {
			v := bytes.Repeat([]byte{byte(g.lsn), byte(i)}, g.valueSize/2)
			sl.Messages = append(sl.Messages, &logstorepb.Message{Value: v, Key: []byte(fmt.Sprint(g.lsn))})
		}
		g.next[topic] += uint64(g.msgs)
		txn.Slices = append(txn.Slices, sl)
	}
	return txn
}

// appendN appends n transactions from g and returns them.
func appendN(t testing.TB, l *Log, g *gen, n int) []*logstorepb.Transaction {
	t.Helper()
	out := make([]*logstorepb.Transaction, 0, n)
	for range n {
		txn := g.txn()
		if err := l.Append(txn); err != nil {
			t.Fatalf("Append lsn %d: %v", txn.Lsn, err)
		}
		out = append(out, txn)
	}
	return out
}

// readAll returns every record in [from, to].
func readAll(t testing.TB, l *Log, from, to types.LSN) []*logstorepb.Transaction {
	t.Helper()
	var out []*logstorepb.Transaction
	err := l.Read(from, to, func(txn *logstorepb.Transaction) (bool, error) {
		out = append(out, txn)
		return true, nil
	})
	if err != nil {
		t.Fatalf("Read(%d, %d): %v", from, to, err)
	}
	return out
}

// sameTxns fails unless got and want hold the same transactions.
func sameTxns(t testing.TB, got, want []*logstorepb.Transaction) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d transactions, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("transaction %d: got lsn %d %v, want lsn %d", i, got[i].Lsn, got[i], want[i].Lsn)
		}
	}
}

// mustPanic runs f and returns the panic message; fails if f does not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("no panic")
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}
