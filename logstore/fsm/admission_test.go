package fsm

import (
	"testing"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// wantDuplicate fails unless r is the duplicate answer of a request first
// committed at lsn.
func wantDuplicate(t *testing.T, what string, r Result, lsn uint64) {
	t.Helper()
	resp, _ := r.Resp.(*logstorepb.AppendResponse)
	if r.Err != nil || resp == nil || !resp.Duplicate || resp.Lsn != lsn {
		t.Fatalf("%s: %v (err %v), want the first result (lsn %d) as a duplicate", what, resp, r.Err, lsn)
	}
}

// TestRetryOfCommittedSequenceAfterSchemaChange is defect 1 of issue #26:
// a producer's sequence commits, its answer is lost, the topic is declared
// kv meanwhile, and the retry (the same request) must get the first result
// as a duplicate, not SCHEMA_MISMATCH: producer dedup comes before every
// check of the request. Registered and legacy producers alike.
func TestRetryOfCommittedSequenceAfterSchemaChange(t *testing.T) {
	s := newProducerSM(t, nil)
	p := s.init("p")
	first := lsnOf(t, s.apply(regAppend(p, 1, "not a mutation")))
	legacy := appendCmd(&logstorepb.AppendRequest{ProducerId: "legacy", Sequence: 1,
		Slices: []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte("nor this")}}}}})
	legacyFirst := lsnOf(t, s.apply(legacy))
	if r := s.apply(declare("t", "", kv)); r.Err != nil {
		t.Fatal(r.Err)
	}

	wantDuplicate(t, "registered retry after the schema change", s.apply(regAppend(p, 1, "not a mutation")), first)
	wantDuplicate(t, "legacy retry after the schema change", s.apply(legacy), legacyFirst)
	// A new sequence is checked against the schema as before.
	wantCode(t, "new sequence", s.apply(regAppend(p, 2, "not a mutation")), logstorepb.ErrorCode_SCHEMA_MISMATCH)
	if n := s.copies("not a mutation"); n != 1 {
		t.Fatalf("the registered producer's message is in the log %d times", n)
	}
	// The refused sequence 2 did not consume the sequence: a valid 2 goes through.
	ok := appendCmd(&logstorepb.AppendRequest{ProducerId: p.ProducerId, ProducerEpoch: p.Epoch, Sequence: 2,
		Slices: []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{put("k")}}}})
	if r := s.apply(ok); r.Err != nil {
		t.Fatalf("valid sequence 2 after the refusal: %v", r.Err)
	}

	// At version 3 apply still checks the topics first (replicas of mixed
	// binaries must agree): the same retry is SCHEMA_MISMATCH there.
	m, l := newTestSM()
	v3 := &producerSM{t: t, m: m, l: l}
	if r := v3.apply(SetClusterVersionCommand(3)); r.Err != nil {
		t.Fatal(r.Err)
	}
	p = v3.init("p")
	lsnOf(t, v3.apply(regAppend(p, 1, "not a mutation")))
	if r := v3.apply(declare("t", "", kv)); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantCode(t, "retry at version 3", v3.apply(regAppend(p, 1, "not a mutation")), logstorepb.ErrorCode_SCHEMA_MISMATCH)
}

// TestLegacyProducerRefusedByDefault is defect 7 of issue #26: an Append
// naming a producer id the cluster never registered (no producer_epoch) is
// refused with LEGACY_PRODUCER_REFUSED and writes nothing (no transaction,
// no producer row) unless the entry's limits allow legacy producers. At
// cluster version 3 apply takes it as before.
func TestLegacyProducerRefusedByDefault(t *testing.T) {
	legacy := appendCmd(&logstorepb.AppendRequest{ProducerId: "legacy", Sequence: 1, Slices: slices2("a", "b", 1)})
	s := newProducerSM(t, &logstorepb.ApplyLimits{})
	wantCode(t, "legacy id by default", s.apply(legacy), logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED)
	if len(s.l.txns) != 0 || len(s.m.State().producers) != 0 {
		t.Fatalf("refused append wrote %d txns, %d producer rows", len(s.l.txns), len(s.m.State().producers))
	}
	// Anonymous appends and registered producers are not concerned.
	if r := s.apply(appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1)})); r.Err != nil {
		t.Fatalf("append without a producer: %v", r.Err)
	}

	s.lim = &logstorepb.ApplyLimits{AllowLegacyProducers: true}
	first := lsnOf(t, s.apply(legacy))
	// The flag turned off again: the committed sequence's retry is still
	// answered (dedup comes first), a new sequence is refused.
	s.lim = &logstorepb.ApplyLimits{}
	wantDuplicate(t, "retry once the flag is off", s.apply(legacy), first)
	next := appendCmd(&logstorepb.AppendRequest{ProducerId: "legacy", Sequence: 2, Slices: slices2("a", "b", 1)})
	wantCode(t, "next sequence once the flag is off", s.apply(next), logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED)

	m, l := newTestSM()
	v3 := &producerSM{t: t, m: m, l: l, lim: &logstorepb.ApplyLimits{}}
	if r := v3.apply(SetClusterVersionCommand(3)); r.Err != nil {
		t.Fatal(r.Err)
	}
	lsnOf(t, v3.apply(legacy))
}

// newGroupSMAt is newGroupSM at cluster version v.
func newGroupSMAt(t *testing.T, v uint32) *groupSM {
	g := newGroupSM(t)
	if r := g.at(0, SetClusterVersionCommand(v)); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	return g
}

func report(consumer string, acked uint64) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_ReportConsumer{ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: consumer, AckedLsn: acked}}}
}

// TestLateReportOfRemovedTargetRefused is defect 3 of issue #26: once a
// cluster runs player groups, a ReportConsumer for "logplayer/<id>" whose
// target is not registered (a late report after `target remove`) is
// refused with UNKNOWN_TARGET and writes nothing: the consumer row does
// not come back to pin retention. Other consumers, and a cluster without
// player groups (a single LogPlayer reports its configured targets), are
// not concerned.
func TestLateReportOfRemovedTargetRefused(t *testing.T) {
	g := newGroupSMAt(t, CurrentVersion)
	if r := g.at(sec, report("logplayer/solo", 3))[0]; r.Err != nil {
		t.Fatalf("report without player groups: %v", r.Err)
	}
	g.ok(sec, report("logplayer/solo", 0), &logstorepb.Command{Kind: &logstorepb.Command_ReportConsumer{ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: "logplayer/solo", Remove: true}}})
	g.ok(sec, reg("x"), hb("a", "1"))
	g.ok(sec, report("logplayer/x", 5))
	g.ok(sec, unreg("x"))
	r := g.at(sec, report("logplayer/x", 9))[0]
	if apierr.CodeOf(r.Err) != logstorepb.ErrorCode_UNKNOWN_TARGET || apierr.Detail(r.Err).TargetId != "x" {
		t.Fatalf("late report after unregister: %v, want UNKNOWN_TARGET naming x", r.Err)
	}
	if c := g.m.st.Consumers(); len(c) != 0 {
		t.Fatalf("late report left consumer rows %v", c)
	}
	if _, ok := g.m.st.MinConsumerLSN(); ok {
		t.Fatal("late report pins retention")
	}
	g.ok(sec, report("backup-job", 4)) // not a target's consumer
}

// TestRenewalDoesNotRebalance is defect 6 of issue #26: the assignment is
// recomputed on membership and registry changes only (docs/ARCHITECTURE.md,
// "Assignment"), not on a plain renewal: the renewal runs no rebalance,
// keeps the generation and answers the member's assignment.
func TestRenewalDoesNotRebalance(t *testing.T) {
	g := newGroupSMAt(t, CurrentVersion)
	g.ok(sec, reg("x"), reg("y"), reg("z"), hb("a", "1"), hb("b", "1"))
	gen, _ := g.counters()
	before := g.m.rebalances
	r := g.ok(2*sec, hb("a", "1"))[0].Resp.(*logstorepb.GroupHeartbeatResponse)
	if g.m.rebalances != before {
		t.Fatalf("a plain renewal ran %d rebalances", g.m.rebalances-before)
	}
	if now, _ := g.counters(); now != gen || r.Generation != gen || len(r.Assignments) != len(g.owned("a")) || len(r.Assignments) == 0 {
		t.Fatalf("renewal: generation %d -> %d (answered %d), assignments %v, owned %v", gen, now, r.Generation, r.Assignments, g.owned("a"))
	}
	g.ok(2*sec, hb("c", "1")) // a join rebalances
	if g.m.rebalances == before {
		t.Fatal("a join ran no rebalance")
	}
}
