package logplayer

import (
	"context"
	"fmt"
	"testing"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// perTargetEntries counts what the Player keeps per target id outside its
// runners.
func perTargetEntries(p *Player) int {
	p.floors.Lock()
	defer p.floors.Unlock()
	return len(p.floors.last) + len(p.floors.removed)
}

// Targets added and removed one after another (each handshaken and its
// floor reported) leave a bounded number of entries in the Player's
// per-target-id maps, not one per id ever seen.
func TestRemovedTargetsArePruned(t *testing.T) {
	const (
		removedMax = 8
		targets    = 3 * removedMax
	)
	store := newFakeStore(t)
	store.Append(&logstorepb.Slice{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
	pr := startPlayer(t, store, nil, nil)
	pr.p.floors.Lock()
	pr.p.floors.removedMax = removedMax
	pr.p.floors.Unlock()
	ctx := context.Background()
	for i := range targets {
		tt := newMemTarget(t, fmt.Sprintf("t%d", i), "t")
		if err := pr.p.AddTarget(ctx, tt.config()); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, testwait.Max, tt.id+"'s floor reported", func() bool {
			return store.Consumers()[ConsumerName(tt.id)] == store.Head()
		})
		if err := pr.p.RemoveTarget(ctx, tt.id); err != nil {
			t.Fatal(err)
		}
		tt.stop()
	}
	if n := perTargetEntries(pr.p); n > removedMax {
		t.Fatalf("%d per-target entries kept after %d targets were added and removed, want at most %d", n, targets, removedMax)
	}
}
