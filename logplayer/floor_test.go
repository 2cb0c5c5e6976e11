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
