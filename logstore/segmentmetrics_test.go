package logstore

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The segment log's seal and truncation counters reach /metrics: seals
// with their time, records dropped by TruncateAfterRaftIndex, and a torn
// tail cut at Open.
func TestSegmentMetricsMove(t *testing.T) {
	dir := t.TempDir()
	opts := segment.Options{Dir: dir, SegmentBytes: 4 << 10, Logger: slog.New(slog.DiscardHandler)}
	l, err := segment.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSegmentCollector(l, "n1"))
	const seal = "logstore_segment_seal_duration_seconds"
	node := map[string]string{"node": "n1"}
	if n, sum := testmetric.Value(t, reg, seal, node), testmetric.Sum(t, reg, seal, node); n != 0 || sum != 0 {
		t.Fatalf("seals before any append: %v in %vs", n, sum)
	}

	// 200 transactions of ~200 bytes over 4 KB segments: several seals.
	var txns []*logstorepb.Transaction
	for lsn := uint64(1); lsn <= 200; lsn++ {
		txns = append(txns, &logstorepb.Transaction{Lsn: lsn, RaftIndex: lsn, Slices: []*logstorepb.TxnSlice{{
			Topic: "orders", FirstOffset: lsn - 1, Messages: []*logstorepb.Message{{Value: make([]byte, 200)}},
		}}})
	}
	if err := l.AppendBatch(txns); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	n, sum := testmetric.Value(t, reg, seal, node), testmetric.Sum(t, reg, seal, node)
	if st.Seals < 5 || n != float64(st.Seals) || sum <= 0 || sum != st.SealTime.Seconds() {
		t.Fatalf("%v seals in %vs exported, stats %+v: want the stats' count (>= 5) and time", n, sum, st)
	}

	// Recovery drops the records after Raft index 150.
	dropped, err := l.TruncateAfterRaftIndex(150)
	if err != nil || dropped != 50 {
		t.Fatalf("TruncateAfterRaftIndex: %d, %v", dropped, err)
	}
	if got := testmetric.Value(t, reg, "logstore_segment_truncated_records_total", node); got != 50 {
		t.Fatalf("truncated records %v, want 50", got)
	}

	// A torn tail on the active segment is cut at the next Open.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segment files %v, %v", segs, err)
	}
	f, err := os.OpenFile(slices.Max(segs), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("torn record")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if l, err = segment.Open(opts); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg = prometheus.NewRegistry()
	reg.MustRegister(newSegmentCollector(l, "n1"))
	if got := testmetric.Value(t, reg, "logstore_segment_truncated_bytes_total", node); got != float64(len("torn record")) {
		t.Fatalf("truncated bytes %v, want %d", got, len("torn record"))
	}
}
