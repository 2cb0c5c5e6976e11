package logstore

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
	if s := sealSummary(t, reg); s.GetSampleCount() != 0 || s.GetSampleSum() != 0 {
		t.Fatalf("seals before any append: %v", s)
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
	s := sealSummary(t, reg)
	if st.Seals < 5 || s.GetSampleCount() != st.Seals || s.GetSampleSum() <= 0 || s.GetSampleSum() != st.SealTime.Seconds() {
		t.Fatalf("seal summary %v, stats %+v: want the stats' count (>= 5) and time", s, st)
	}

	// Recovery drops the records after Raft index 150.
	dropped, err := l.TruncateAfterRaftIndex(150)
	if err != nil || dropped != 50 {
		t.Fatalf("TruncateAfterRaftIndex: %d, %v", dropped, err)
	}
	if got := counterValue(t, reg, "logstore_segment_truncated_records_total"); got != 50 {
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
	if got := counterValue(t, reg, "logstore_segment_truncated_bytes_total"); got != float64(len("torn record")) {
		t.Fatalf("truncated bytes %v, want %d", got, len("torn record"))
	}
}

// sealSummary gathers logstore_segment_seal_duration_seconds from reg.
func sealSummary(t *testing.T, reg *prometheus.Registry) *dto.Summary {
	t.Helper()
	return family(t, reg, "logstore_segment_seal_duration_seconds").GetMetric()[0].GetSummary()
}

// counterValue gathers the counter name from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return family(t, reg, name).GetMetric()[0].GetCounter().GetValue()
}

func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetLabel()[0].GetValue() != "n1" {
				t.Fatalf("%s: %v, want one series with node=n1", name, mf)
			}
			return mf
		}
	}
	t.Fatalf("no %s", name)
	return nil
}
