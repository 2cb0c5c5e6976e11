package fsm

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// memLog is an in-memory txnAppender that checks LSN continuity.
type memLog struct{ txns []*logstorepb.Transaction }

func (l *memLog) AppendBatch(txns []*logstorepb.Transaction) error {
	for _, txn := range txns {
		if want := uint64(len(l.txns)) + 1; txn.Lsn != want {
			return fmt.Errorf("lsn %d, want %d", txn.Lsn, want)
		}
		l.txns = append(l.txns, proto.Clone(txn).(*logstorepb.Transaction))
	}
	return nil
}

func newTestSM() (*Machine, *memLog) {
	l := &memLog{}
	return NewMachine(NewState(), l), l
}

// smallLimits are the stamped limits of TestProducerTableBoundedAndExpiring.
var smallLimits = &logstorepb.ApplyLimits{MaxProducers: 3, ProducerIdleExpiryNanos: int64(time.Hour)}

func appendCmd(r *logstorepb.AppendRequest) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_Append{Append: r}}
}

func slices2(a, b string, n int) []*logstorepb.Slice {
	msgs := func() []*logstorepb.Message {
		out := make([]*logstorepb.Message, n)
		for i := range out {
			out[i] = &logstorepb.Message{Value: []byte{byte(i)}}
		}
		return out
	}
	return []*logstorepb.Slice{{Topic: a, Messages: msgs()}, {Topic: b, Messages: msgs()}}
}

func TestApplyAssignsDenseLSNsAndOffsets(t *testing.T) {
	sm, l := newTestSM()
	res := sm.Apply(1, &logstorepb.Entry{TimestampUnixNano: 10, Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 2)}),
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("b", "c", 3)}),
	}})
	r0 := res[0].Resp.(*logstorepb.AppendResponse)
	r1 := res[1].Resp.(*logstorepb.AppendResponse)
	if r0.Lsn != 1 || r1.Lsn != 2 {
		t.Fatalf("lsns %d %d, want 1 2", r0.Lsn, r1.Lsn)
	}
	if r1.Slices[0].Topic != "b" || r1.Slices[0].FirstOffset != 2 || r1.Slices[1].FirstOffset != 0 {
		t.Fatalf("second txn slices = %v", r1.Slices)
	}
	if got := sm.st.topics; got["a"] != 2 || got["b"] != 5 || got["c"] != 3 {
		t.Fatalf("next offsets = %v", got)
	}
	if len(l.txns) != 2 || l.txns[1].RaftIndex != 1 || l.txns[1].TimestampUnixNano != 10 {
		t.Fatalf("log = %v", l.txns)
	}
}

func TestApplyTimestampNeverDecreases(t *testing.T) {
	sm, l := newTestSM()
	sm.Apply(1, &logstorepb.Entry{TimestampUnixNano: 100, Commands: []*logstorepb.Command{appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1)})}})
	sm.Apply(2, &logstorepb.Entry{TimestampUnixNano: 50, Commands: []*logstorepb.Command{appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1)})}})
	if l.txns[1].TimestampUnixNano != 100 {
		t.Fatalf("second timestamp %d, want clamped to 100", l.txns[1].TimestampUnixNano)
	}
}

func TestIdempotentProducer(t *testing.T) {
	sm, l := newTestSM()
	req := func(seq uint64) *logstorepb.Command {
		return appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), ProducerId: "p", Sequence: seq})
	}
	res := sm.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{req(1), req(1), req(3), req(2)}})
	first := res[0].Resp.(*logstorepb.AppendResponse)
	dup := res[1].Resp.(*logstorepb.AppendResponse)
	if !dup.Duplicate || dup.Lsn != first.Lsn || dup.Slices[0].FirstOffset != first.Slices[0].FirstOffset {
		t.Fatalf("retry = %v, want first result %v with duplicate", dup, first)
	}
	if d := apierr.Detail(res[2].Err); d == nil || d.Code != logstorepb.ErrorCode_SEQUENCE_MISMATCH || d.ExpectedSequence != 2 {
		t.Fatalf("gap: err %v detail %v", res[2].Err, d)
	}
	if status.Code(res[2].Err) != codes.FailedPrecondition {
		t.Fatalf("gap code %v", status.Code(res[2].Err))
	}
	if r := res[3].Resp.(*logstorepb.AppendResponse); r.Lsn != 2 || r.Duplicate {
		t.Fatalf("seq 2 = %v", r)
	}
	if len(l.txns) != 2 {
		t.Fatalf("%d txns written, want 2", len(l.txns))
	}
	// A sequence older than the last is refused, not answered.
	res = sm.Apply(2, &logstorepb.Entry{Commands: []*logstorepb.Command{req(1)}})
	if d := apierr.Detail(res[0].Err); d == nil || d.ExpectedSequence != 3 {
		t.Fatalf("old sequence: %v", res[0].Err)
	}
	// A new producer must start at 1.
	res = sm.Apply(3, &logstorepb.Entry{Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), ProducerId: "q", Sequence: 5}),
	}})
	if d := apierr.Detail(res[0].Err); d == nil || d.ExpectedSequence != 1 {
		t.Fatalf("new producer at 5: %v", res[0].Err)
	}
}

func TestConditionFailsOnlyItsTxn(t *testing.T) {
	sm, l := newTestSM()
	res := sm.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), Conditions: []*logstorepb.Condition{{Topic: "a", ExpectedNextOffset: 0}}}),
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), Conditions: []*logstorepb.Condition{{Topic: "a", ExpectedNextOffset: 0}}}),
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), Conditions: []*logstorepb.Condition{{Topic: "zzz", ExpectedNextOffset: 0}}}),
	}})
	if res[0].Err != nil || res[2].Err != nil {
		t.Fatalf("winners failed: %v %v", res[0].Err, res[2].Err)
	}
	d := apierr.Detail(res[1].Err)
	if d == nil || d.Code != logstorepb.ErrorCode_CONDITION_FAILED || d.Topic != "a" || d.ActualNextOffset != 1 {
		t.Fatalf("loser detail = %v", d)
	}
	if len(l.txns) != 2 || l.txns[1].Lsn != 2 || sm.st.topics["a"] != 2 {
		t.Fatalf("txns %d, next a %d", len(l.txns), sm.st.topics["a"])
	}
}

func TestFailedConditionConsumesProducerSequence(t *testing.T) {
	sm, _ := newTestSM()
	bad := appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), ProducerId: "p", Sequence: 1,
		Conditions: []*logstorepb.Condition{{Topic: "a", ExpectedNextOffset: 9}}})
	res := sm.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{bad, bad}})
	for i, r := range res {
		if d := apierr.Detail(r.Err); d == nil || d.Code != logstorepb.ErrorCode_CONDITION_FAILED || d.ActualNextOffset != 0 {
			t.Fatalf("result %d = %v", i, r.Err)
		}
	}
	if sm.st.producers["p"].LastSequence != 1 {
		t.Fatalf("last sequence %d", sm.st.producers["p"].LastSequence)
	}
}

func TestOffsetsOnlyTxnAndEpochAndConsumers(t *testing.T) {
	sm, l := newTestSM()
	res := sm.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g", Topic: "a", Offset: 7}}}),
		{Kind: &logstorepb.Command_NextEpoch{NextEpoch: &logstorepb.NextEpochRequest{}}},
		{Kind: &logstorepb.Command_NextEpoch{NextEpoch: &logstorepb.NextEpochRequest{}}},
		{Kind: &logstorepb.Command_ReportConsumer{ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: "c1", AckedLsn: 5}}},
		{Kind: &logstorepb.Command_ReportConsumer{ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: "c2", AckedLsn: 3}}},
		{Kind: &logstorepb.Command_ReportConsumer{ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: "c2", Remove: true}}},
	}})
	if r := res[0].Resp.(*logstorepb.AppendResponse); r.Lsn != 1 || len(l.txns[0].OffsetCommits) != 1 {
		t.Fatalf("offsets-only txn = %v", r)
	}
	if e := res[2].Resp.(*logstorepb.NextEpochResponse).Epoch; e != 2 {
		t.Fatalf("epoch %d", e)
	}
	if floor, ok := sm.st.MinConsumerLSN(); !ok || floor != 5 {
		t.Fatalf("floor %d %v", floor, ok)
	}
	if got := sm.st.GroupOffsets("g", nil); len(got) != 1 || got[0].Offset != 7 {
		t.Fatalf("group offsets %v", got)
	}
}

func TestProducerTableBoundedAndExpiring(t *testing.T) {
	sm, _ := newTestSM()
	for i, id := range []string{"p1", "p2", "p3", "p4"} {
		sm.Apply(uint64(i+1), &logstorepb.Entry{TimestampUnixNano: int64(i + 1), Limits: smallLimits, Commands: []*logstorepb.Command{
			appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), ProducerId: id, Sequence: 1}),
		}})
	}
	if _, ok := sm.st.producers["p1"]; ok || len(sm.st.producers) != 3 {
		t.Fatalf("producers %v: p1 should be evicted", sortedKeys(sm.st.producers))
	}
	later := int64(2*time.Hour) + 10
	sm.Apply(5, &logstorepb.Entry{TimestampUnixNano: later, Limits: smallLimits, Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1), ProducerId: "p9", Sequence: 1}),
	}})
	if len(sm.st.producers) != 1 {
		t.Fatalf("producers after expiry %v", sortedKeys(sm.st.producers))
	}
}

// TestApplyDeterministic replays the same entries into two state machines
// and a snapshot round trip, and compares state and log bytes.
func TestApplyDeterministic(t *testing.T) {
	entries := []*logstorepb.Entry{}
	for i := range 50 {
		var cmds []*logstorepb.Command
		for j := range 5 {
			r := &logstorepb.AppendRequest{Slices: slices2(fmt.Sprintf("t%d", j), fmt.Sprintf("u%d", i%3), 1+j%2)}
			if j%2 == 0 {
				r.ProducerId, r.Sequence = fmt.Sprintf("p%d", j), uint64(i+1)
			}
			if j == 3 {
				r.Conditions = []*logstorepb.Condition{{Topic: "t3", ExpectedNextOffset: uint64(i * 2)}}
				r.OffsetCommits = []*logstorepb.OffsetCommit{{Group: "g", Topic: "t3", Offset: uint64(i)}}
			}
			cmds = append(cmds, appendCmd(r))
		}
		entries = append(entries, &logstorepb.Entry{TimestampUnixNano: int64(i) * int64(time.Minute), Commands: cmds})
	}
	a, la := newTestSM()
	b, lb := newTestSM()
	for i, e := range entries[:25] {
		a.Apply(uint64(i+1), e)
		b.Apply(uint64(i+1), e)
	}
	// b continues from a snapshot of its state.
	snap, err := proto.Marshal(b.st.ToProto())
	if err != nil {
		t.Fatal(err)
	}
	var p logstorepb.FSMState
	if err := proto.Unmarshal(snap, &p); err != nil {
		t.Fatal(err)
	}
	if b.st, err = StateFromProto(&p); err != nil {
		t.Fatal(err)
	}
	for i, e := range entries[25:] {
		a.Apply(uint64(i+26), e)
		b.Apply(uint64(i+26), e)
	}
	sa, _ := proto.MarshalOptions{Deterministic: true}.Marshal(a.st.ToProto())
	sb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(b.st.ToProto())
	if string(sa) != string(sb) {
		t.Fatal("states differ after the same entries")
	}
	if len(la.txns) != len(lb.txns) || len(la.txns) < 200 {
		t.Fatalf("txns %d vs %d", len(la.txns), len(lb.txns))
	}
	for i := range la.txns {
		if !proto.Equal(la.txns[i], lb.txns[i]) {
			t.Fatalf("txn %d differs", i+1)
		}
	}
}

// TestApplyOfTheBuiltEntryMatchesDecoded: the leader applies the Entry its
// aggregator built (logstore/api/sent.go), every other replica the same
// entry decoded from its bytes. Both must answer and write the same: the
// entries hold what survives encoding only up to nil against empty (empty
// values and keys, empty header and slice lists) and unknown fields.
func TestApplyOfTheBuiltEntryMatchesDecoded(t *testing.T) {
	var entries []*logstorepb.Entry
	cmd := func(i int) *logstorepb.Command {
		switch i % 6 {
		case 0:
			return SetClusterVersionCommand(CurrentVersion)
		case 1:
			return initCmd(fmt.Sprintf("prod-%d", i%4))
		case 2:
			return &logstorepb.Command{Kind: &logstorepb.Command_NextEpoch{NextEpoch: &logstorepb.NextEpochRequest{}}}
		case 3:
			return &logstorepb.Command{Kind: &logstorepb.Command_Member{Member: &logstorepb.MemberCommand{Id: fmt.Sprintf("n%d", i%3), ApiAddress: "a"}}}
		}
		r := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
			{Topic: "t", Messages: []*logstorepb.Message{
				{Value: []byte{}, Key: []byte{}, Headers: []*logstorepb.Header{}},
				{Value: []byte{byte(i)}, Headers: []*logstorepb.Header{{Key: "h", Value: []byte{}}}},
			}},
			{Topic: "u", Messages: []*logstorepb.Message{}},
		}, Conditions: []*logstorepb.Condition{}, OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g", Topic: "t", Offset: uint64(i)}}}
		if i%3 == 0 {
			r.ProducerId, r.Sequence = "legacy", uint64(i/3+1)
		}
		// A field of a newer client's request, unknown here.
		r.ProtoReflect().SetUnknown([]byte{0xf8, 0x07, 0x01})
		return appendCmd(r)
	}
	for i := range 40 {
		var cmds []*logstorepb.Command
		for j := range 1 + i%4 {
			cmds = append(cmds, cmd(i+j))
		}
		entries = append(entries, &logstorepb.Entry{TimestampUnixNano: int64(i) * int64(time.Second), Limits: &logstorepb.ApplyLimits{AllowLegacyProducers: true}, Commands: cmds})
	}
	built, lb := newTestSM()
	decoded, ld := newTestSM()
	for i, e := range entries {
		data, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var d logstorepb.Entry
		if err := proto.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		rb, rd := built.Apply(uint64(i+1), e), decoded.Apply(uint64(i+1), &d)
		for j := range rb {
			if !proto.Equal(rb[j].Resp, rd[j].Resp) || status.Convert(rb[j].Err).String() != status.Convert(rd[j].Err).String() {
				t.Fatalf("entry %d command %d: built %v %v, decoded %v %v", i+1, j, rb[j].Resp, rb[j].Err, rd[j].Resp, rd[j].Err)
			}
		}
	}
	det := proto.MarshalOptions{Deterministic: true}
	sb, _ := det.Marshal(built.st.ToProto())
	sd, _ := det.Marshal(decoded.st.ToProto())
	if string(sb) != string(sd) {
		t.Fatal("states differ")
	}
	if len(lb.txns) != len(ld.txns) || len(lb.txns) < 20 {
		t.Fatalf("txns %d vs %d", len(lb.txns), len(ld.txns))
	}
	for i := range lb.txns {
		tb, _ := det.Marshal(lb.txns[i])
		td, _ := det.Marshal(ld.txns[i])
		if string(tb) != string(td) {
			t.Fatalf("txn %d: the segment log gets other bytes", i+1)
		}
	}
}
