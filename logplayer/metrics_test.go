package logplayer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/testmetric"
)

// The series a group member's scrape shows before it delivers anything
// (the Player's, its fetcher's and its group's: names, help strings,
// labels, buckets) are the ones in testdata/metrics.txt.
func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := New(Config{PlayerID: "p1", LogStore: []string{"127.0.0.1:1"}, Registerer: reg,
		Group: &GroupConfig{Name: "g1", MemberID: "m1"}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tm := p.m.forTarget("t1")
	tm.refusals.WithLabelValues("STALE_EPOCH")
	tm.recoveryErrors.WithLabelValues("below_retention")
	testmetric.Golden(t, reg, "testdata/metrics.txt")
	if _, err := newMetrics(reg, p); err == nil {
		t.Fatal("a second Player on the same registry: no error")
	}
	conns := []grpc.ClientConnInterface{p.conns[0]}
	if _, err := newMember(p, GroupConfig{Name: "g1", MemberID: "m1"}, conns); err == nil {
		t.Fatal("a second group member on the same registry: no error")
	}
}
