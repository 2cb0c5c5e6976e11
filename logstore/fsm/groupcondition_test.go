package fsm

import (
	"testing"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// rpwCmd is a read-process-write step: output to "out", commit group g's
// offset of "in" to next, on condition that it is still from.
func rpwCmd(from, next uint64) *logstorepb.Command {
	return appendCmd(&logstorepb.AppendRequest{
		Slices:        []*logstorepb.Slice{{Topic: "out", Messages: []*logstorepb.Message{{Value: []byte{byte(from)}}}}},
		Conditions:    []*logstorepb.Condition{{Group: "g", Topic: "in", ExpectedNextOffset: from}},
		OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g", Topic: "in", Offset: next}},
	})
}

// TestGroupOffsetCondition: a condition on a group's committed offset is
// checked against the state before the txn's own commits; a zombie that
// resumed from an old offset fails alone, with the group and actual offset.
func TestGroupOffsetCondition(t *testing.T) {
	sm, l := newTestSM()
	res := sm.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{
		rpwCmd(0, 1), // never committed: 0
		rpwCmd(0, 1), // a second instance that also started at 0
		rpwCmd(1, 3),
		// A topic condition and a group condition on the same topic are
		// different conditions: "in" has no messages (next offset 0).
		appendCmd(&logstorepb.AppendRequest{
			Slices: []*logstorepb.Slice{{Topic: "x", Messages: []*logstorepb.Message{{}}}},
			Conditions: []*logstorepb.Condition{
				{Topic: "in", ExpectedNextOffset: 0}, {Group: "g", Topic: "in", ExpectedNextOffset: 3}, {Group: "other", Topic: "in"},
			},
		}),
	}})
	if res[0].Err != nil || res[2].Err != nil || res[3].Err != nil {
		t.Fatalf("winners failed: %v / %v / %v", res[0].Err, res[2].Err, res[3].Err)
	}
	d := apierr.Detail(res[1].Err)
	if d == nil || d.Code != logstorepb.ErrorCode_CONDITION_FAILED || d.Group != "g" || d.Topic != "in" || d.ActualNextOffset != 1 {
		t.Fatalf("zombie detail = %v (%v)", d, res[1].Err)
	}
	if got := sm.st.GroupOffsets("g", nil); len(got) != 1 || got[0].Offset != 3 {
		t.Fatalf("group offsets %v, want in=3", got)
	}
	if len(l.txns) != 3 || sm.st.topics["out"] != 2 {
		t.Fatalf("%d txns, out next %d; want 3 and 2", len(l.txns), sm.st.topics["out"])
	}
}
