package logplayer

import (
	"testing"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
)

// A slow-target kick can find no conn to end: Dispatch suspends the target
// between the session's Return and the publication of its conn. The live
// stream's sender then never gets anything again (a suspended queue has no
// front, and nothing wakes it). This puts the dispatcher in exactly that
// state — the live term suspended, no kick — and checks the target still
// catches up (runner.session re-checks after publishing its conn; the
// progress ticker ends any such stream). Found in review; without the fix
// the target stayed at LSN 1 with its stream open.
func TestSuspendedWithoutKickRecovers(t *testing.T) {
	store := newFakeStore(t)
	tgt := newMemTarget(t, "t", "a")
	pr := startPlayer(t, store, []*testTarget{tgt}, nil)
	store.Append(&logstorepb.Slice{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("x")}}})
	waitApplied(t, store, tgt)
	d := pr.p.dispatcher()
	testwait.For(t, testwait.Max, "target in N", func() bool {
		st, _ := d.Stats("t")
		return st.State == targetqueue.Normal
	})
	before, _ := d.Stats("t")

	d.Suspend("t") // what Dispatch's overflow does; its kick found no conn

	for range 10 {
		store.Append(&logstorepb.Slice{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("y")}}})
	}
	waitApplied(t, store, tgt)
	if after, _ := d.Stats("t"); after.Term <= before.Term {
		t.Fatalf("target caught up without a new session: term %d -> %d", before.Term, after.Term)
	}
	pr.stop(t)
	checkTargets(t, storeLog(store), tgt)
}
