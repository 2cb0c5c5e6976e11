package target_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

func logHello(epoch types.Epoch, session types.Session, cluster, inc string) *targetpb.Hello {
	h := targettest.Hello("t1", epoch, session)
	h.LogClusterId, h.LogIncarnation = cluster, inc
	return h
}

// The first Hello with a log identity is adopted (also by a State written
// before identities existed); a Hello from another log is refused with
// OTHER_LOG and changes nothing; a Hello without one (an older LogPlayer) is
// not checked; Config.AdoptLogIdentity is the operator's reset.
func TestLogIdentity(t *testing.T) {
	store := &targettest.MemStore{}
	if err := store.Apply(nil, target.State{AppliedLSN: 7, Epoch: 1}); err != nil { // an old State
		t.Fatal(err)
	}
	e := newEnv(t, store, nil)
	s, _, err := targettest.Open(ctxT(t), e.cc, logHello(1, 1, "c1", "i1"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st, _ := store.State(); st.LogClusterID != "c1" || st.LogIncarnation != "i1" || st.AppliedLSN != 7 {
		t.Fatalf("State after the first Hello %+v, want identity c1/i1 adopted", st)
	}
	_, _, err = targettest.Open(ctxT(t), e.cc, logHello(2, 1, "c1", "i2"))
	d := wantRefusal(t, err, codes.FailedPrecondition, logstorepb.ErrorCode_OTHER_LOG)
	if d.LogIdentity != "c1/i1" || d.AppliedLsn != 7 {
		t.Fatalf("detail %v, want the stored identity c1/i1 and lsn 7", d)
	}
	if st, _ := store.State(); st.Epoch != 1 || st.LogIncarnation != "i1" {
		t.Fatalf("a refused Hello changed the State: %+v", st)
	}
	s, ack, err := targettest.Open(ctxT(t), e.cc, logHello(2, 1, "", ""))
	if err != nil {
		t.Fatalf("Hello without identity: %v", err)
	}
	s.Close()
	if ack.LogClusterId != "c1" || ack.LogIncarnation != "i1" {
		t.Fatalf("HelloAck identity %s/%s, want c1/i1", ack.LogClusterId, ack.LogIncarnation)
	}

	e2 := newEnv(t, store, func(c *target.Config) { c.AdoptLogIdentity = true })
	s, _, err = targettest.Open(ctxT(t), e2.cc, logHello(3, 1, "c1", "i2"))
	if err != nil {
		t.Fatalf("with AdoptLogIdentity: %v", err)
	}
	s.Close()
	if st, _ := store.State(); st.LogIncarnation != "i2" || st.Epoch != 3 {
		t.Fatalf("State after the operator's reset %+v, want incarnation i2, epoch 3", st)
	}
}
