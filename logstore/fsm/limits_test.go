package fsm

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// nodeMaxConsumers is logstore.MaxConsumers, the cap a node stamps today
// (this package may not import logstore): a legacy entry ignores it.
const nodeMaxConsumers = 4096

func consumerCmd(name string, acked uint64, remove bool) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_ReportConsumer{
		ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: name, AckedLsn: acked, Remove: remove}}}
}

func producerAppend(id string, seq uint64) *logstorepb.Command {
	return appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), ProducerId: id, Sequence: seq})
}

// wantTableFull checks a cap refusal: RESOURCE_EXHAUSTED / TABLE_FULL with
// the cap as limit.
func wantTableFull(t *testing.T, what string, r Result, limit uint64) {
	t.Helper()
	d := apierr.Detail(r.Err)
	if status.Code(r.Err) != codes.ResourceExhausted || d.GetCode() != logstorepb.ErrorCode_TABLE_FULL || d.GetLimit() != limit {
		t.Fatalf("%s: got %v (detail %v), want RESOURCE_EXHAUSTED TABLE_FULL limit %d", what, r.Err, d, limit)
	}
}

// TestEntryWithoutLimitsAppliesLegacyValues: an entry written before the
// leader stamped limits applies as it did then (10000 producers, 24h idle
// expiry, no consumer or group-offset cap), whatever the node's config.
func TestEntryWithoutLimitsAppliesLegacyValues(t *testing.T) {
	if got := LimitsOf(nil); got != (Limits{MaxProducers: 10000, ProducerIdleNanos: int64(24 * time.Hour),
		GroupLeaseNanos: DefaultGroupLeaseNanos, MaxRegisteredTargets: legacyMaxRegisteredTargets, AllowLegacyProducers: true}) {
		t.Fatalf("legacy limits %+v", got)
	}
	if got := LimitsOf(&logstorepb.ApplyLimits{MaxConsumers: 5}); got.MaxProducers != 10000 || got.ProducerIdleNanos != int64(24*time.Hour) || got.MaxConsumers != 5 {
		t.Fatalf("zero fields must be legacy: %+v", got)
	}
	sm, _ := newTestSM()
	idx := uint64(0)
	apply := func(ts time.Duration, cmds ...*logstorepb.Command) []Result {
		idx++
		return sm.Apply(idx, &logstorepb.Entry{TimestampUnixNano: int64(ts), Commands: cmds})
	}
	apply(time.Minute, producerAppend("old", 1))
	apply(23*time.Hour, producerAppend("young", 1)) // sweep: "old" idle 23h-1m, kept
	if _, ok := sm.st.producers["old"]; !ok {
		t.Fatal("producer idle under 24h dropped by a legacy entry")
	}
	apply(24*time.Hour+2*time.Minute, producerAppend("young", 2)) // "old" idle > 24h
	if _, ok := sm.st.producers["old"]; ok {
		t.Fatal("producer idle over 24h kept by a legacy entry")
	}
	// No consumer cap.
	var cmds []*logstorepb.Command
	for i := range nodeMaxConsumers + 10 {
		cmds = append(cmds, consumerCmd(fmt.Sprintf("c%d", i), 1, false))
	}
	for i, r := range apply(25*time.Hour, cmds...) {
		if r.Err != nil {
			t.Fatalf("legacy entry refused consumer %d: %v", i, r.Err)
		}
	}
}

// TestSmallerProducerLimitEvictsDownToIt: when a leader with a smaller
// MaxProducers takes over, the next new producer evicts the least recently
// seen ones until it fits.
func TestSmallerProducerLimitEvictsDownToIt(t *testing.T) {
	sm, _ := newTestSM()
	for i := range 6 {
		sm.Apply(uint64(i+1), &logstorepb.Entry{TimestampUnixNano: int64(i + 1), Commands: []*logstorepb.Command{producerAppend(fmt.Sprintf("p%d", i), 1)}})
	}
	sm.Apply(7, &logstorepb.Entry{TimestampUnixNano: 7, Limits: &logstorepb.ApplyLimits{MaxProducers: 3},
		Commands: []*logstorepb.Command{producerAppend("new", 1)}})
	if got := sortedKeys(sm.st.producers); fmt.Sprint(got) != "[new p4 p5]" {
		t.Fatalf("producers %v, want [new p4 p5]", got)
	}
}

func TestConsumerTableCap(t *testing.T) {
	sm, _ := newTestSM()
	lim := &logstorepb.ApplyLimits{MaxConsumers: 2}
	res := sm.Apply(1, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{
		consumerCmd("c1", 5, false),
		consumerCmd("c2", 6, false),
		consumerCmd("c3", 1, false), // full
		consumerCmd("c1", 9, false), // an update still applies
		consumerCmd("c2", 0, true),  // so does a removal…
		consumerCmd("c3", 1, false), // …which makes room
		consumerCmd("c4", 1, false), // full again
	}})
	for i, wantErr := range []bool{false, false, true, false, false, false, true} {
		if wantErr {
			wantTableFull(t, fmt.Sprintf("command %d", i), res[i], 2)
		} else if res[i].Err != nil {
			t.Fatalf("command %d: %v", i, res[i].Err)
		}
	}
	if got := fmt.Sprint(sm.st.consumers); got != "map[c1:9 c3:1]" {
		t.Fatalf("consumers %s, want map[c1:9 c3:1]", got)
	}
}

func TestGroupOffsetTableCap(t *testing.T) {
	sm, l := newTestSM()
	lim := &logstorepb.ApplyLimits{MaxGroupOffsets: 3}
	commit := func(id string, seq uint64, keys ...string) *logstorepb.Command {
		r := &logstorepb.AppendRequest{Slices: slices2("a", "b", 1), ProducerId: id, Sequence: seq}
		for _, k := range keys {
			r.OffsetCommits = append(r.OffsetCommits, &logstorepb.OffsetCommit{Group: "g" + k[:1], Topic: "t" + k[1:], Offset: 1})
		}
		return appendCmd(r)
	}
	res := sm.Apply(1, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{
		commit("", 0, "11", "12"),        // 2 rows
		commit("p", 1, "11", "21", "21"), // one new row, named twice: 3 rows
		commit("p", 2, "22"),             // a fourth: refused, sequence not consumed
		commit("p", 2, "11", "12", "21"), // existing rows only: applies at sequence 2
		commit("", 0, "31"),              // refused without a producer too
	}})
	for i, wantErr := range []bool{false, false, true, false, true} {
		if wantErr {
			wantTableFull(t, fmt.Sprintf("command %d", i), res[i], 3)
		} else if res[i].Err != nil {
			t.Fatalf("command %d: %v", i, res[i].Err)
		}
	}
	if len(l.txns) != 3 || len(sm.st.groups) != 3 || sm.st.lastLSN != 3 {
		t.Fatalf("%d txns, %d group rows, last lsn %d: want 3, 3, 3 (refusals write nothing)", len(l.txns), len(sm.st.groups), sm.st.lastLSN)
	}
	if p := sm.st.producers["p"]; p.LastSequence != 2 || p.Result.GetLsn() != 3 {
		t.Fatalf("producer row %v: want sequence 2 at lsn 3", p)
	}
	// A duplicate of the last sequence is answered from the row even when
	// the table is full.
	res = sm.Apply(2, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{commit("p", 2, "99")}})
	if r, ok := res[0].Resp.(*logstorepb.AppendResponse); !ok || !r.Duplicate || r.Lsn != 3 {
		t.Fatalf("retry of the last sequence: %v / %v", res[0].Resp, res[0].Err)
	}
}

// TestDeleteGroupFreesRows: DeleteGroup removes exactly that group's rows
// (the count is answered), a second delete removes nothing, and a group
// refused by the full table fits once rows were deleted.
func TestDeleteGroupFreesRows(t *testing.T) {
	sm, _ := newTestSM()
	lim := &logstorepb.ApplyLimits{MaxGroupOffsets: 3}
	commit := func(group string, topics ...string) *logstorepb.Command {
		r := &logstorepb.AppendRequest{Slices: slices2("a", "b", 1)}
		for _, tp := range topics {
			r.OffsetCommits = append(r.OffsetCommits, &logstorepb.OffsetCommit{Group: group, Topic: tp, Offset: 7})
		}
		return appendCmd(r)
	}
	del := func(group string) *logstorepb.Command {
		return &logstorepb.Command{Kind: &logstorepb.Command_DeleteGroup{DeleteGroup: &logstorepb.DeleteGroupRequest{Group: group}}}
	}
	res := sm.Apply(1, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{
		commit("g1", "x", "y"), commit("g2", "x"), commit("g3", "x"),
		SetClusterVersionCommand(CurrentVersion), // DeleteGroup needs it
	}})
	wantTableFull(t, "a fourth row", res[2], 3)
	res = sm.Apply(2, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{
		del("g1"), del("g1"), del("nobody"), commit("g3", "x"),
	}})
	for i, want := range []uint64{2, 0, 0} {
		if r, ok := res[i].Resp.(*logstorepb.DeleteGroupResponse); !ok || r.Removed != want {
			t.Fatalf("delete %d: %v / %v, want %d removed", i, res[i].Resp, res[i].Err, want)
		}
	}
	if res[3].Err != nil {
		t.Fatalf("commit after the delete: %v", res[3].Err)
	}
	got := map[string]types.Offset{}
	for k, off := range sm.st.groups {
		got[k.group+"/"+k.topic] = off
	}
	if len(got) != 2 || got["g2/x"] != 7 || got["g3/x"] != 7 {
		t.Fatalf("group rows %v, want g2/x and g3/x", got)
	}
}
