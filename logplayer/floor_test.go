package logplayer

import (
	"context"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// A target removed and added again keeps its retention floor (issue 13
// part 4): RemoveTarget drops its consumer row, and the re-added target
// must put it back even while it is down (it needs everything after its
// applied LSN when it returns) and even when its acked LSN did not change
// since the last report before the removal.
func TestReAddedTargetKeepsFloor(t *testing.T) {
	for _, down := range []bool{false, true} {
		name := "up"
		if down {
			name = "down"
		}
		t.Run(name, func(t *testing.T) {
			store := newFakeStore(t)
			a := newMemTarget(t, "a", "t")
			// A long report interval: the remove and the add fall between
			// two reports.
			pr := startPlayer(t, store, []*testTarget{a}, func(c *Config) { c.ReportInterval = 300 * time.Millisecond })
			for range 20 {
				store.Append(&logstorepb.Slice{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
			}
			waitApplied(t, store, a)
			head := store.Head()
			testwait.For(t, testwait.Max, "a reported", func() bool { return store.Consumers()[ConsumerName("a")] == head })
			if down {
				a.stop()
			}
			ctx := context.Background()
			if err := pr.p.RemoveTarget(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if _, ok := store.Consumers()[ConsumerName("a")]; ok {
				t.Fatal("RemoveTarget kept the consumer row")
			}
			if err := pr.p.AddTarget(ctx, a.config()); err != nil {
				t.Fatal(err)
			}
			testwait.For(t, 10*time.Second, "the re-added target's floor back at its acked LSN", func() bool {
				lsn, ok := store.Consumers()[ConsumerName("a")]
				return ok && lsn == head
			})
		})
	}
}

// TestRefusedReportNotRepeated is the LogPlayer side of issue #26 defect
// 3: once the LogStore refuses a target's report with UNKNOWN_TARGET (its
// target was removed from the registry), the reporter does not report that
// target again (no warning and call every tick), while it goes on
// reporting the others.
func TestRefusedReportNotRepeated(t *testing.T) {
	store := newFakeStore(t)
	a, b := newMemTarget(t, "a", "t"), newMemTarget(t, "b", "t")
	startPlayer(t, store, []*testTarget{a, b}, func(c *Config) { c.ReportInterval = 20 * time.Millisecond })
	store.Unregister(ConsumerName("a"))
	for round := range 3 {
		for range 5 {
			store.Append(&logstorepb.Slice{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
		}
		waitApplied(t, store, a, b)
		head := store.Head()
		// b reported at head: the reporter ran a whole tick after a acked
		// head as well (a tick reports every target).
		testwait.For(t, testwait.Max, "b reported", func() bool { return store.Consumers()[ConsumerName("b")] == head })
		if round == 0 {
			continue // a's first report may still be on its way
		}
		if n := store.RefusedReports(ConsumerName("a")); n != 1 {
			t.Fatalf("round %d: a's report refused %d times, want once (then not sent again)", round, n)
		}
	}
}
