package api

import (
	"bytes"
	"testing"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// discardLog is an fsm.Log that keeps nothing (the tests read the state).
type discardLog struct{}

func (discardLog) AppendBatch([]*logstorepb.Transaction) error { return nil }

// TestAdmissionAnswersRetryFirst: a committed sequence's retry is answered
// from the state before validation and schemas (it would fail both now);
// a new sequence is validated first (MESSAGE_TOO_LARGE), then checked
// against the schema Read found (SCHEMA_MISMATCH); a legacy id is refused
// unless the limits allow it.
func TestAdmissionAnswersRetryFirst(t *testing.T) {
	m := fsm.NewMachine(fsm.NewState(), discardLog{})
	idx := uint64(0)
	apply := func(c *logstorepb.Command) fsm.Result {
		t.Helper()
		idx++
		r := m.Apply(idx, &logstorepb.Entry{TimestampUnixNano: int64(idx), Commands: []*logstorepb.Command{c}})[0]
		if r.Err != nil {
			t.Fatalf("command %d: %v", idx, r.Err)
		}
		return r
	}
	apply(fsm.SetClusterVersionCommand(fsm.CurrentVersion))
	p := apply(&logstorepb.Command{Kind: &logstorepb.Command_InitProducer{InitProducer: &logstorepb.InitProducerRequest{Name: "p"}}}).Resp.(*logstorepb.InitProducerResponse)
	big := bytes.Repeat([]byte("x"), 2048)
	req := func(seq uint64) *logstorepb.AppendRequest {
		return &logstorepb.AppendRequest{ProducerId: p.ProducerId, ProducerEpoch: p.Epoch, Sequence: seq,
			Slices: []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{{Value: big}}}}}
	}
	first := apply(&logstorepb.Command{Kind: &logstorepb.Command_Append{Append: req(1)}}).Resp.(*logstorepb.AppendResponse)
	apply(&logstorepb.Command{Kind: &logstorepb.Command_CreateTopic{CreateTopic: &logstorepb.CreateTopicRequest{
		Declaration: &logstorepb.TopicDeclaration{Topic: "t", Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_KV}}}})

	a := Read(m.State(), req(1), true)
	resp, err := a.Answer()
	if !a.IsRetry() || err != nil || !resp.GetDuplicate() || resp.Lsn != first.Lsn {
		t.Fatalf("retry: %v %v %v, want the first result (lsn %d) as a duplicate", a.IsRetry(), resp, err, first.Lsn)
	}

	a = Read(m.State(), req(2), true)
	if a.IsRetry() {
		t.Fatal("a new sequence taken for a retry")
	}
	if _, err := a.Check(req(2), Limits{MaxMessageBytes: 1024, MaxRequestBytes: 1 << 20}); apierr.CodeOf(err) != logstorepb.ErrorCode_MESSAGE_TOO_LARGE {
		t.Fatalf("new sequence above the message limit: %v", err)
	}
	if _, err := a.Check(req(2), Limits{MaxMessageBytes: 1 << 20, MaxRequestBytes: 1 << 20}); apierr.CodeOf(err) != logstorepb.ErrorCode_SCHEMA_MISMATCH {
		t.Fatalf("new sequence against the kv schema: %v", err)
	}

	legacy := &logstorepb.AppendRequest{ProducerId: "legacy", Sequence: 1, Slices: []*logstorepb.Slice{{Topic: "u", Messages: []*logstorepb.Message{{}}}}}
	a = Read(m.State(), legacy, true)
	if _, err := a.Check(legacy, Limits{MaxMessageBytes: 1 << 20, MaxRequestBytes: 1 << 20}); apierr.CodeOf(err) != logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED {
		t.Fatalf("legacy id by default: %v", err)
	}
	if _, err := a.Check(legacy, Limits{MaxMessageBytes: 1 << 20, MaxRequestBytes: 1 << 20, AllowLegacyProducers: true}); err != nil {
		t.Fatalf("legacy id allowed: %v", err)
	}
}
