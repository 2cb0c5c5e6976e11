package logplayer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/dispatcher"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Player.ticker on a fake clock (testing/synctest): an idle target that is
// behind gets a progress marker at the first tick after it became idle
// (the ticker looks every quarter ProgressInterval), never sooner than a
// ProgressInterval after the last push to it, with its sender woken; and
// the dispatch saturation is the busy fraction of each saturationInterval.
// Only the ticker runs: no targets, no LogStore.
func TestTickerProgressAndSaturation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Second
		d := dispatcher.New(dispatcher.Config{ProgressIdle: interval}, 0)
		if err := d.AddTarget("a", []string{"x"}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Return("a", 0); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		p := &Player{cfg: Config{ProgressInterval: interval, Now: time.Now}, m: &metrics{
			saturation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "logplayer_dispatch_saturation"}),
		}}
		reg.MustRegister(p.m.saturation)
		saturation := func() float64 { return testmetric.Value(t, reg, "logplayer_dispatch_saturation", nil) }
		p.d.Store(d)
		r := &runner{wake: make(chan struct{}, 1)}
		p.runners.Store(&map[string]*runner{"a": r})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); p.ticker(ctx) }()
		defer func() { cancel(); <-done }()

		start := time.Now()
		// LSN 1 has nothing for a (topic y): a is behind and idle.
		other := func(lsn uint64) *logstorepb.Transaction {
			return &logstorepb.Transaction{Lsn: lsn, Slices: []*logstorepb.TxnSlice{{Topic: "y", Messages: []*logstorepb.Message{{}}}}}
		}
		d.Dispatch(other(1), time.Now().UnixNano())
		p.busyNanos.Store(int64(250 * time.Millisecond)) // a quarter of the first second in Dispatch

		markers := func() uint64 {
			s, _ := d.Stats("a")
			return s.ProgressMarkers
		}
		// markerAt checks that the want-th marker comes exactly at
		// start+at (not a nanosecond before) and wakes the sender.
		markerAt := func(at time.Duration, want uint64) {
			t.Helper()
			time.Sleep(time.Until(start.Add(at)) - time.Nanosecond)
			synctest.Wait()
			if got := markers(); got != want-1 || len(r.wake) != 0 {
				t.Fatalf("just before %v: %d markers (wake %d), want %d", at, got, len(r.wake), want-1)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if got := markers(); got != want || len(r.wake) != 1 {
				t.Fatalf("at %v: %d markers (wake %d), want %d and the sender woken", at, got, len(r.wake), want)
			}
			<-r.wake
		}
		// Nothing was ever pushed to a: it is idle already, and the first
		// tick (a quarter interval) sends the marker, as it does for a
		// target a group member has just taken over.
		tick := interval / 4 // the ticker looks every quarter interval
		markerAt(tick, 1)
		s, _ := d.Stats("a")
		msgs, ok := d.NextBatchForTerm("a", s.Term, 10, 1<<20)
		if !ok || len(msgs) != 1 || !msgs[0].IsProgress() || msgs[0].LSN != 1 || msgs[0].DispatchedUnixNano != start.Add(tick).UnixNano() {
			t.Fatalf("took %+v (%v), want the marker for lsn 1 stamped at %v", msgs, ok, tick)
		}
		if err := d.AckTerm("a", s.Term, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(start.Add(interval)))
		synctest.Wait()
		if got := saturation(); got != 0.25 {
			t.Fatalf("saturation %v, want 0.25", got)
		}

		// Caught up: no marker until LSN 2 (nothing for a) at 2.2s; a was
		// idle since its marker at 0.25s, so the tick at 2.25s sends one.
		time.Sleep(time.Until(start.Add(2*interval + 200*time.Millisecond)))
		synctest.Wait()
		if markers() != 1 {
			t.Fatalf("%d markers to a caught-up target", markers())
		}
		if got := saturation(); got != 0 {
			t.Fatalf("saturation %v over the idle second before 2s, want 0", got)
		}
		d.Dispatch(other(2), time.Now().UnixNano())
		markerAt(2*interval+tick, 2)
		s, _ = d.Stats("a")
		if msgs, ok := d.NextBatchForTerm("a", s.Term, 10, 1<<20); !ok || len(msgs) != 1 || msgs[0].LSN != 2 {
			t.Fatalf("took %+v (%v), want the marker for lsn 2", msgs, ok)
		}
		if err := d.AckTerm("a", s.Term, 2); err != nil {
			t.Fatal(err)
		}

		// LSN 3 right after: a marker was pushed at 2.25s, so a is not
		// idle before 3.25s; the ticks at 2.5, 2.75 and 3s send nothing.
		time.Sleep(10 * time.Millisecond)
		d.Dispatch(other(3), time.Now().UnixNano())
		markerAt(3*interval+tick, 3)
	})
}
