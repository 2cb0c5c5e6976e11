package target_test

import (
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// skipEnv is a target whose Store refuses any message "bad" permanently and
// whose first delivery Apply blocks until release, so that the batches sent
// meanwhile are checked and applied as one group.
type skipEnv struct {
	*env
	s       *targettest.Sender
	release chan struct{}
	blocked chan struct{}
}

func newSkipEnv(t *testing.T, skip ...types.LSN) *skipEnv {
	se := &skipEnv{release: make(chan struct{}), blocked: make(chan struct{}, 1)}
	store := &targettest.MemStore{}
	var first sync.Once
	store.BeforeApply = func(ds []*targetpb.Delivery, _ target.State) error {
		if len(ds) == 0 {
			return nil // epoch record
		}
		first.Do(func() {
			se.blocked <- struct{}{}
			<-se.release
		})
		return refuseBad(ds)
	}
	se.env = newEnv(t, store, func(c *target.Config) {
		c.Topics = []string{"a", "b"}
		c.SkipLSNs = skip
	})
	se.s, _ = se.open(1, 1)
	return se
}

// group sends first (applied alone, blocking the applier), then batches
// (queued behind it: one group), then lets the applier go and returns the
// stream's final error.
func (se *skipEnv) group(first []*targetpb.Delivery, batches ...[]*targetpb.Delivery) error {
	t := se.t
	if err := se.s.Send(first...); err != nil {
		t.Fatal(err)
	}
	<-se.blocked
	for _, b := range batches {
		if err := se.s.Send(b...); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, testwait.Max, "batches queued behind the blocked Apply", func() bool {
		return target.QueueLen(se.srv) == len(batches)
	})
	close(se.release)
	return se.s.Wait(ctxT(t))
}

func slice(lsn uint64, topic string, first uint64, v string) *targetpb.Delivery {
	return &targetpb.Delivery{Lsn: lsn, Slices: []*logstorepb.TxnSlice{{Topic: topic, FirstOffset: first, Messages: []*logstorepb.Message{{Value: []byte(v)}}}}}
}

// An operator's skip (lsn 2 of topic a) followed in the same group by a
// permanent refusal (lsn 3): the batches before the refusal are applied again
// on their own, and the skipped LSN must still advance topic a, else every
// later delivery of a fails with an offset gap.
func TestSkipThenPermanentKeepsOffsets(t *testing.T) {
	se := newSkipEnv(t, 2)
	err := se.group([]*targetpb.Delivery{slice(1, "a", 0, "1")},
		[]*targetpb.Delivery{slice(2, "a", 1, "skipped")},
		[]*targetpb.Delivery{slice(3, "b", 0, "bad")})
	if d := wantRefusal(t, err, codes.DataLoss, logstorepb.ErrorCode_APPLY_REJECTED); d.Lsn != 3 {
		t.Fatalf("refused lsn %d, want 3", d.Lsn)
	}
	st, _ := se.store.State()
	if st.AppliedLSN != 2 || st.Topics["a"] != 2 {
		t.Fatalf("saved State lsn %d topic a next %d, want lsn 2 and a at 2 (lsn 2's offset skipped, not lost)",
			st.AppliedLSN, st.Topics["a"])
	}
	// The next delivery of topic a (after the operator also fixed lsn 3) applies.
	s, _ := se.open(1, 2)
	if err := s.Send(slice(4, "a", 2, "4")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 4); err != nil {
		t.Fatalf("delivery of topic a after the skip: %v", err)
	}
}

// The same with another delivery of the skipped topic after the skip and
// before the refused batch: the retry of the batches before the refusal must
// not fail continuity (it used to panic and kill the target process).
func TestSkipThenPermanentRetryDoesNotPanic(t *testing.T) {
	se := newSkipEnv(t, 2)
	err := se.group([]*targetpb.Delivery{slice(1, "a", 0, "1")},
		[]*targetpb.Delivery{slice(2, "a", 1, "skipped")},
		[]*targetpb.Delivery{slice(3, "a", 2, "3")},
		[]*targetpb.Delivery{slice(4, "b", 0, "bad")})
	if d := wantRefusal(t, err, codes.DataLoss, logstorepb.ErrorCode_APPLY_REJECTED); d.Lsn != 4 {
		t.Fatalf("refused lsn %d, want 4", d.Lsn)
	}
	if se.s.Acked() != 3 {
		t.Fatalf("acked %d, want 3", se.s.Acked())
	}
	st, _ := se.store.State()
	if st.AppliedLSN != 3 || st.Topics["a"] != 3 {
		t.Fatalf("saved State lsn %d topic a next %d, want lsn 3 and a at 3", st.AppliedLSN, st.Topics["a"])
	}
	if got := appliedLSNs(se.store); len(got) != 3 || len(se.store.Applied()[1].Slices) != 0 {
		t.Fatalf("applied %v, want 1..3 with lsn 2 a progress marker", got)
	}
}
