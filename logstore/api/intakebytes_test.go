package api

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestIntakeByteBound: the intake queue is bounded by bytes as well as by
// count: a request that would take the queued bytes above
// Config.IntakeQueueBytes answers QUEUE_FULL (RESOURCE_EXHAUSTED, safe to
// retry) at once while the count bound still has room; the queued ones
// complete, and the queued-bytes gauge follows.
func TestIntakeByteBound(t *testing.T) {
	size := proto.Size(&logstorepb.Command{Kind: &logstorepb.Command_Append{Append: &logstorepb.AppendRequest{ProducerId: "x"}}})
	a, r := testAggregator(t, func(a *Aggregator) {
		a.maxTxns, a.maxInflight = 1, 1
		a.maxIntakeBytes = int64(3 * size) // the count bound (8192) stays far away
	})
	res := []<-chan submitted{submitAsync(a, "a")}
	e1 := r.next(t)
	res = append(res, submitAsync(a, "b")) // the batch (full: one command)
	testwait.For(t, testwait.Max, "b taken into the batch", func() bool { return intakeTaken(a, 2) })
	for _, id := range []string{"c", "d", "e"} { // fill the byte bound
		res = append(res, submitAsync(a, id))
	}
	testwait.For(t, testwait.Max, "c, d, e queued", func() bool { return len(a.intake) == 3 })
	if got := gaugeValue(t, a.metrics.intakeBytes); got != float64(3*size) {
		t.Fatalf("intake bytes gauge %v, want %d", got, 3*size)
	}
	s := wait(t, submitAsync(a, "f"))
	if !errors.Is(s.err, apierr.ErrQueueFull) {
		t.Fatalf("f: %v, want ErrQueueFull", s.err)
	}
	if err := apierr.Status(s.err); status.Code(err) != codes.ResourceExhausted || apierr.CodeOf(err) != logstorepb.ErrorCode_QUEUE_FULL {
		t.Fatalf("f's status %v, want RESOURCE_EXHAUSTED QUEUE_FULL", err)
	}
	e1.resolve()
	for range 4 {
		r.next(t).resolve()
	}
	for _, ch := range res {
		if s := wait(t, ch); s.err != nil {
			t.Fatal(s.err)
		}
	}
	if got := gaugeValue(t, a.metrics.intakeBytes); got != 0 {
		t.Fatalf("intake bytes gauge %v after the queue drained, want 0", got)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
