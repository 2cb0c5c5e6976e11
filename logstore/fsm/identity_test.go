package fsm

import (
	"testing"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The log identity: refused below IdentityVersion; the first SetLogIdentity
// sets both parts, a later one changes nothing; a restore's
// MarkNewIncarnation raises the epoch counter by the margin and makes the
// next SetLogIdentity replace the incarnation (only), and all of it
// survives a snapshot.
func TestLogIdentity(t *testing.T) {
	m, _ := newTestSM()
	idx := uint64(0)
	apply := func(c *logstorepb.Command) Result {
		idx++
		return m.Apply(idx, &logstorepb.Entry{TimestampUnixNano: int64(idx), Commands: []*logstorepb.Command{c}})[0]
	}
	if r := apply(SetLogIdentityCommand("c1", "i1")); apierr.CodeOf(r.Err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("below version %d: %v, want FEATURE_NOT_ENABLED", IdentityVersion, r.Err)
	}
	if r := apply(SetClusterVersionCommand(IdentityVersion)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if !m.State().NeedsLogIdentity() {
		t.Fatal("no identity and NeedsLogIdentity false")
	}
	if r := apply(SetLogIdentityCommand("", "i1")); apierr.CodeOf(r.Err) != logstorepb.ErrorCode_INVALID_ARGUMENT {
		t.Fatalf("empty cluster id: %v", r.Err)
	}
	for _, c := range []*logstorepb.Command{SetLogIdentityCommand("c1", "i1"), SetLogIdentityCommand("c2", "i2")} {
		if r := apply(c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	want := func(cluster, inc string, stale bool) {
		t.Helper()
		c, i, s := m.State().LogIdentity()
		if c != cluster || i != inc || s != stale {
			t.Fatalf("identity %s/%s stale %v, want %s/%s stale %v", c, i, s, cluster, inc, stale)
		}
	}
	want("c1", "i1", false)

	apply(&logstorepb.Command{Kind: &logstorepb.Command_NextEpoch{NextEpoch: &logstorepb.NextEpochRequest{}}})
	st := m.State()
	st.MarkNewIncarnation()
	if st.Epoch() != 1+EpochSafetyMargin || !st.NeedsLogIdentity() {
		t.Fatalf("after MarkNewIncarnation: epoch %d needs %v, want %d and true", st.Epoch(), st.NeedsLogIdentity(), 1+EpochSafetyMargin)
	}
	b, err := MarshalState(st.ToProto())
	if err != nil {
		t.Fatal(err)
	}
	restored, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	m.SetState(restored)
	want("c1", "i1", true)
	if r := apply(SetLogIdentityCommand("c3", "i3")); r.Err != nil {
		t.Fatal(r.Err)
	}
	want("c1", "i3", false)
	if m.State().NeedsLogIdentity() {
		t.Fatal("NeedsLogIdentity after the new incarnation")
	}
}
