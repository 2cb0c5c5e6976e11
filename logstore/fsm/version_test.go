package fsm

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// futureCommand is a Command as a newer binary writes it: a oneof case
// (field 999) this binary does not know, so it decodes with a nil Kind.
func futureCommand(t *testing.T) *logstorepb.Command {
	t.Helper()
	b := protowire.AppendTag(nil, 999, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("whatever a newer leader sends"))
	c := &logstorepb.Command{}
	if err := proto.Unmarshal(b, c); err != nil {
		t.Fatal(err)
	}
	if c.Kind != nil {
		t.Fatalf("kind %T, want none", c.Kind)
	}
	return c
}

// An entry carrying a command this binary does not know is applied
// without a panic: that command is refused (FEATURE_NOT_ENABLED, no
// effect), the others in the entry apply as usual.
func TestApplyUnknownCommandKindRefusedNotPanic(t *testing.T) {
	m, l := newTestSM()
	e := &logstorepb.Entry{TimestampUnixNano: 1, Commands: []*logstorepb.Command{
		futureCommand(t),
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("t", "x", 1)}),
	}}
	out := m.Apply(1, e)
	if len(out) != 2 {
		t.Fatalf("%d results", len(out))
	}
	if out[0].Err == nil || apierr.CodeOf(out[0].Err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("unknown kind: %v, want FEATURE_NOT_ENABLED", out[0].Err)
	}
	if out[1].Err != nil || len(l.txns) != 1 {
		t.Fatalf("append beside it: %v, %d txns", out[1].Err, len(l.txns))
	}
}

// A command above the committed cluster version is refused by apply on
// every replica (the same result an old replica gives a kind it does not
// know), and accepted once SetClusterVersion raised the version.
func TestApplyGatesCommandsOnClusterVersion(t *testing.T) {
	m, _ := newTestSM()
	del := &logstorepb.Command{Kind: &logstorepb.Command_DeleteGroup{DeleteGroup: &logstorepb.DeleteGroupRequest{Group: "g"}}}
	if v := m.State().ClusterVersion(); v != BaseVersion {
		t.Fatalf("new state at version %d, want %d", v, BaseVersion)
	}
	if err := Gate(m.State(), del); apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("gate before: %v", err)
	}
	out := m.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{del}})
	if apierr.CodeOf(out[0].Err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("apply before: %v", out[0].Err)
	}
	out = m.Apply(2, &logstorepb.Entry{Commands: []*logstorepb.Command{SetClusterVersionCommand(CurrentVersion), del}})
	if out[0].Err != nil || out[1].Err != nil {
		t.Fatalf("after: %v, %v", out[0].Err, out[1].Err)
	}
	if err := Gate(m.State(), del); err != nil {
		t.Fatalf("gate after: %v", err)
	}
	// The version survives a snapshot and never goes down.
	st, err := StateFromProto(m.State().ToProto())
	if err != nil || st.ClusterVersion() != CurrentVersion {
		t.Fatalf("restored version %d, %v", st.ClusterVersion(), err)
	}
	out = m.Apply(3, &logstorepb.Entry{Commands: []*logstorepb.Command{SetClusterVersionCommand(BaseVersion)}})
	if out[0].Err == nil || m.State().ClusterVersion() != CurrentVersion {
		t.Fatalf("lowering: %v, version %d", out[0].Err, m.State().ClusterVersion())
	}
}
