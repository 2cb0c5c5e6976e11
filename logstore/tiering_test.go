package logstore_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/tier"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// downS3 serves an in-memory S3 (gofakes3) that answers 503 while down is
// set (it starts down), with the credentials set in the environment.
func downS3(t *testing.T) (*httptest.Server, *atomic.Bool, *s3mem.Backend) {
	t.Helper()
	down := new(atomic.Bool)
	backend := s3mem.New()
	fake := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testsecret")
	down.Store(true)
	return srv, down, backend
}

// TestRetentionWaitsForTier: with tiered storage and the object store
// down, retention deletes nothing (the upload lag shows why); once the
// store answers, the segments are uploaded, retention deletes them, and a
// Read from LSN 1 still returns the whole log, from the tier.
func TestRetentionWaitsForTier(t *testing.T) {
	srv, down, _ := downS3(t)
	reg := prometheus.NewRegistry()
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.Registry = reg
		cfg.SegmentBytes, cfg.RetentionBytes = 16<<10, 64<<10 // RetentionInterval: an hour; the test runs it
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 8, 20*time.Millisecond
		cfg.Tier = &tier.Config{URL: "s3://logs/node", Endpoint: srv.URL, ScanInterval: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond}
	})
	cl := newClient(t, c.addrs()...)
	n := c.Nodes[0]
	const count = 400
	loadPastBudget(t, cl, n, count)
	if _, err := n.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if first := n.SegmentLog().FirstLSN(); first != 1 {
		t.Fatalf("retention deleted below lsn %d with nothing uploaded", first)
	}
	testwait.For(t, 30*time.Second, "upload lag and errors", func() bool {
		return testmetric.Value(t, reg, "logstore_tier_upload_lag_segments", nil) > 0 &&
			testmetric.Value(t, reg, "logstore_tier_upload_errors_total", nil) > 0
	})
	down.Store(false)
	testwait.For(t, 30*time.Second, "uploads", func() bool {
		return testmetric.Value(t, reg, "logstore_tier_upload_lag_segments", nil) == 0 &&
			testmetric.Value(t, reg, "logstore_tier_uploaded_segments_total", nil) > 0
	})
	if _, err := n.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if first := n.SegmentLog().FirstLSN(); first <= 1 {
		t.Fatal("retention deleted nothing once the tier held the segments")
	}
	st, err := cl.Status(ctxT(t, 10*time.Second), c.addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.FirstLsn != 1 || st.LocalFirstLsn <= 1 || st.TierFirstLsn != 1 || st.TierLastLsn+1 < st.LocalFirstLsn {
		t.Fatalf("status: first %d, local first %d, tier %d..%d", st.FirstLsn, st.LocalFirstLsn, st.TierFirstLsn, st.TierLastLsn)
	}
	next := uint64(1)
	err = cl.Read(ctxT(t, 30*time.Second), &logstorepb.ReadRequest{FromLsn: 1, ToLsn: st.HeadLsn}, func(resp *logstorepb.ReadResponse) error {
		for _, txn := range resp.Transactions {
			if txn.Lsn != next {
				t.Fatalf("read lsn %d, want %d", txn.Lsn, next)
			}
			next++
		}
		return nil
	})
	if err != nil || next != st.HeadLsn+1 {
		t.Fatalf("Read from lsn 1 stopped at %d of %d: %v", next-1, st.HeadLsn, err)
	}
	if testmetric.Value(t, reg, "logstore_tier_reads_total", nil) == 0 {
		t.Fatal("the read below local retention did not come from the tier")
	}
}
