package logstore_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// counterValue sums the samples of the counter name in reg.
func counterValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return testmetric.Value(t, reg, name, nil)
}

// TestRetentionFloorAndCap (issue 6 point 5): retention by age never
// deletes above the lowest acked LSN of the registered delivery consumers;
// removing a consumer raises the floor; past RetentionCapAge it deletes
// anyway, counts it in logstore_retention_forced_deletes_total, and the
// consumer's position then reads OUT_OF_RANGE / BELOW_RETENTION.
func TestRetentionFloorAndCap(t *testing.T) {
	var skew atomic.Int64 // the node's clock runs this far ahead
	reg := prometheus.NewRegistry()
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		cfg.Registry = reg
		cfg.SegmentBytes = 4 << 10
		cfg.RetentionBytes, cfg.RetentionCapBytes = 1<<40, 1<<40 // age decides
		cfg.RetentionAge, cfg.RetentionCapAge = time.Hour, 2*time.Hour
	})
	n := c.nodes[0]
	cl := newClient(t, n.APIAddr())
	ctx := ctxT(t, 60*time.Second)
	for i := range 200 {
		if _, err := cl.Append(ctx, txnReq(fmt.Sprintf("%04d", i)+strings.Repeat("r", 100), "a")); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ReportConsumer(ctx, "logplayer/shard-0", 120, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.ReportConsumer(ctx, "logplayer/shard-1", 50, false); err != nil {
		t.Fatal(err)
	}
	// A durable snapshot of everything, so only age and the floor decide.
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if len(n.SegmentLog().Segments()) < 6 {
		t.Fatalf("want several segments, got %d", len(n.SegmentLog().Segments()))
	}
	run := func() {
		t.Helper()
		if _, err := n.RunRetention(); err != nil {
			t.Fatal(err)
		}
	}
	const forcedMetric = "logstore_retention_forced_deletes_total"

	run() // nothing is old yet
	if first := n.SegmentLog().FirstLSN(); first != 1 {
		t.Fatalf("fresh data deleted: first lsn %d", first)
	}

	skew.Store(int64(90 * time.Minute)) // older than RetentionAge, younger than the cap
	run()
	run() // idempotent: the floor holds on every run
	if first := n.SegmentLog().FirstLSN(); first <= 1 || first > 51 {
		t.Fatalf("first lsn %d with floor 50: want segments up to the floor deleted, none above", first)
	}
	readFrom := func(lsn uint64) error {
		return cl.Read(ctx, &logstorepb.ReadRequest{FromLsn: lsn, ToLsn: lsn}, func(*logstorepb.ReadResponse) error { return nil })
	}
	if err := readFrom(51); err != nil {
		t.Fatalf("the lowest consumer's next lsn is not readable: %v", err)
	}
	if v := counterValue(t, reg, forcedMetric); v != 0 {
		t.Fatalf("%s = %v under the cap", forcedMetric, v)
	}

	if err := cl.ReportConsumer(ctx, "logplayer/shard-1", 0, true); err != nil { // remove: floor is now 120
		t.Fatal(err)
	}
	run()
	if first := n.SegmentLog().FirstLSN(); first <= 51 || first > 121 {
		t.Fatalf("first lsn %d with floor 120: want deleted beyond 51, none above 121", first)
	}
	if err := readFrom(121); err != nil {
		t.Fatalf("consumer's next lsn 121 not readable: %v", err)
	}

	skew.Store(int64(3 * time.Hour)) // beyond RetentionCapAge: the cap forces it
	run()
	first := uint64(n.SegmentLog().FirstLSN())
	if first <= 121 {
		t.Fatalf("first lsn %d: the cap did not force deleting beyond the floor", first)
	}
	if v := counterValue(t, reg, forcedMetric); v < 1 {
		t.Fatalf("%s = %v after a forced delete", forcedMetric, v)
	}
	err := readFrom(121)
	if d := apierr.Detail(err); status.Code(err) != codes.OutOfRange || d.GetCode() != logstorepb.ErrorCode_BELOW_RETENTION || d.OldestLsn != first {
		t.Fatalf("read at the consumer's deleted position: %v (detail %v), want OUT_OF_RANGE BELOW_RETENTION oldest %d", err, d, first)
	}
}
