package logplayer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

func appendValues(store *fakeStore, n int, value string) {
	for i := range n {
		store.Append(&logstorepb.Slice{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte(fmt.Sprintf("%s%d", value, i))}}})
	}
}

// waitRefused waits until the player reports target id blocked with code.
func waitRefused(t *testing.T, pr *playerRun, id string, code logstorepb.ErrorCode, mem *targettest.MemStore, notAbove uint64) {
	t.Helper()
	testwait.ForErr(t, testwait.Max, id+" blocked with "+code.String(), func() error {
		if st, _ := mem.State(); uint64(st.AppliedLSN) > notAbove {
			t.Fatalf("target applied lsn %d (above %d): it was delivered what it must be refused", st.AppliedLSN, notAbove)
		}
		for _, s := range pr.p.Targets() {
			if s.ID == id && s.Blocked && strings.Contains(s.LastError, code.String()) {
				return nil
			}
			if s.ID == id {
				return fmt.Errorf("status: blocked %v, last error %q", s.Blocked, s.LastError)
			}
		}
		return fmt.Errorf("no status for %s", id)
	})
}

// A target that says it applied an LSN above the log's head (the log was
// restored behind it) is refused, not skipped to. (Once the log grows past
// the target's LSN, only the log identity tells the two apart: see the next
// test.)
func TestTargetAheadOfLogIsRefused(t *testing.T) {
	store := newFakeStore(t)
	appendValues(store, 5, "v")
	mem := &targettest.MemStore{}
	if err := mem.Apply(nil, target.State{AppliedLSN: 20, Epoch: 0}); err != nil {
		t.Fatal(err)
	}
	a := newStoreTarget(t, "a", mem, "t")
	pr := startPlayer(t, store, []*testTarget{a}, nil)
	waitRefused(t, pr, "a", logstorepb.ErrorCode_LOG_BEHIND_TARGET, mem, 20)
	if n := len(mem.Applied()); n != 0 {
		t.Fatalf("target applied %d deliveries, want none", n)
	}
}

// After a restore the log reuses LSNs a target already applied from the
// old incarnation: the target refuses the new incarnation (OTHER_LOG), and
// nothing the restored log appended is applied over its old data.
func TestRestoredLogIsRefusedByTargetOfOldIncarnation(t *testing.T) {
	store := newFakeStore(t)
	store.SetLogIdentity("c1", "i1", 4)
	appendValues(store, 10, "old")
	mem := &targettest.MemStore{}
	a := newStoreTarget(t, "a", mem, "t")
	pr := startPlayer(t, store, []*testTarget{a}, nil)
	waitApplied(t, store, a)
	pr.stop(t)

	store.Restore(5, "i2")
	appendValues(store, 7, "new") // lsns 6..10 reused, then 11, 12
	pr = startPlayer(t, store, []*testTarget{a}, nil)
	waitRefused(t, pr, "a", logstorepb.ErrorCode_OTHER_LOG, mem, 10)
	if got := mem.Applied(); len(got) != 10 || string(got[9].Slices[0].Messages[0].Value) != "old9" {
		t.Fatalf("target applied %d deliveries (last %v), want the 10 of the old incarnation", len(got), got[len(got)-1])
	}
}

// A target ahead of the nodes a Status may ask (followers that lag, such as
// one installing a snapshot after a restart) but not ahead of the log is
// delivered to, not refused: the refusal is permanent, so the head it rests
// on is the highest any node reports.
func TestTargetAheadOfLaggingNodesIsNotRefused(t *testing.T) {
	store := newFakeStore(t)
	appendValues(store, 5, "v")
	store.nodes[0].Freeze()
	store.nodes[1].Freeze()
	appendValues(store, 20, "w") // head 25; nodes 0 and 1 show 5
	mem := &targettest.MemStore{}
	if err := mem.Apply(nil, target.State{AppliedLSN: 20, Topics: map[string]types.Offset{"t": 20}}); err != nil {
		t.Fatal(err)
	}
	a := newStoreTarget(t, "a", mem, "t")
	pr := startPlayer(t, store, []*testTarget{a}, nil)
	// Past the handshake (where the refusal would come), the followers
	// catch up, so the main stream has a node to read from.
	testwait.For(t, testwait.Max, "a's handshake", func() bool {
		for _, s := range pr.p.Targets() {
			if s.ID == "a" && (s.Blocked || s.Returns > 0) {
				return true
			}
		}
		return false
	})
	store.nodes[0].Thaw()
	store.nodes[1].Thaw()
	testwait.ForErr(t, testwait.Max, "a applied the log's head", func() error {
		for _, s := range pr.p.Targets() {
			if s.ID == "a" && s.Blocked {
				t.Fatalf("a refused: %s", s.LastError)
			}
		}
		if st, _ := mem.State(); st.AppliedLSN < 25 {
			return fmt.Errorf("a applied lsn %d", st.AppliedLSN)
		}
		return nil
	})
	if got := mem.Applied(); len(got) != 5 || string(got[0].Slices[0].Messages[0].Value) != "w15" {
		t.Fatalf("a applied %d deliveries, want lsns 21-25 (w15-w19)", len(got))
	}
}
