package fsm

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

const (
	kv          = logstorepb.TopicSchema_TOPIC_SCHEMA_KV
	schemaBytes = logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES
)

func declare(topic, pattern string, s logstorepb.TopicSchema) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_CreateTopic{CreateTopic: &logstorepb.CreateTopicRequest{
		Declaration: &logstorepb.TopicDeclaration{Topic: topic, Pattern: pattern, Schema: s}}}}
}

func put(k string) *logstorepb.Message {
	b, err := proto.Marshal(&shardpb.Mutation{Op: shardpb.Mutation_PUT, Key: []byte(k), Value: []byte("v")})
	if err != nil {
		panic(err)
	}
	return &logstorepb.Message{Value: b}
}

// v3Machine is a machine at cluster version 3 (topics enabled) after
// applying cmds at raft index 1; it fails the test on any refusal.
func v3Machine(t *testing.T, lim *logstorepb.ApplyLimits, cmds ...*logstorepb.Command) (*Machine, *memLog) {
	t.Helper()
	m, l := newTestSM()
	for i, r := range m.Apply(1, &logstorepb.Entry{Limits: lim, Commands: append([]*logstorepb.Command{SetClusterVersionCommand(TopicsVersion)}, cmds...)}) {
		if r.Err != nil {
			t.Fatalf("setup command %d: %v", i, r.Err)
		}
	}
	return m, l
}

// The whole transaction is refused when one message of a kv topic is not a
// mutation: SCHEMA_MISMATCH (INVALID_ARGUMENT) naming the topic, the
// message's index and the declaration; no LSN, no offset, no producer row.
func TestApplySchemaMismatchNamesIndexWritesNothing(t *testing.T) {
	m, l := v3Machine(t, nil, declare("", "shard-*", kv))
	req := &logstorepb.AppendRequest{ProducerId: "p", Sequence: 1, Slices: []*logstorepb.Slice{
		{Topic: "orders", Messages: []*logstorepb.Message{{Value: []byte("any bytes")}}},
		{Topic: "shard-0", Messages: []*logstorepb.Message{put("a"), put("b"), {Value: []byte("hi")}}},
	}}
	out := m.Apply(2, &logstorepb.Entry{Commands: []*logstorepb.Command{appendCmd(req)}})
	err := out[0].Err
	d := apierr.Detail(err)
	if status.Code(err) != codes.InvalidArgument || d.GetCode() != logstorepb.ErrorCode_SCHEMA_MISMATCH ||
		d.Topic != "shard-0" || d.MessageIndex != 2 || d.TopicDeclaration != "shard-*" {
		t.Fatalf("got %v (detail %v), want SCHEMA_MISMATCH shard-0 message 2 by shard-*", err, d)
	}
	st := m.State()
	if len(l.txns) != 0 || st.LastLSN() != 0 || st.NextOffset("orders") != 0 || st.NextOffset("shard-0") != 0 || len(st.producers) != 0 {
		t.Fatalf("refused txn changed state: %d txns, lsn %d, producers %d", len(l.txns), st.LastLSN(), len(st.producers))
	}
	// The same request with a valid third message goes through.
	req.Slices[1].Messages[2] = put("c")
	if out := m.Apply(3, &logstorepb.Entry{Commands: []*logstorepb.Command{appendCmd(req)}}); out[0].Err != nil {
		t.Fatalf("valid txn: %v", out[0].Err)
	}
}

// Precedence: an exact declaration beats every pattern, the longest
// matching pattern beats shorter ones, and an undeclared topic is bytes.
func TestTopicSchemaPrecedence(t *testing.T) {
	m, _ := v3Machine(t, nil,
		declare("", "*", kv),
		declare("", "shard-*", schemaBytes),
		declare("", "shard-1*", kv),
		declare("shard-10", "", schemaBytes),
	)
	st := m.State()
	for _, tc := range []struct {
		topic  string
		schema logstorepb.TopicSchema
		by     string
	}{
		{"orders", kv, "*"},
		{"shard-0", schemaBytes, "shard-*"},
		{"shard-1", kv, "shard-1*"},
		{"shard-12", kv, "shard-1*"},
		{"shard-10", schemaBytes, "shard-10"},
	} {
		if s, by := st.TopicSchema(tc.topic); s != tc.schema || by != tc.by {
			t.Errorf("%s: %v by %q, want %v by %q", tc.topic, s, by, tc.schema, tc.by)
		}
	}
	if s, by := NewState().TopicSchema("x"); s != schemaBytes || by != "" {
		t.Errorf("undeclared: %v by %q", s, by)
	}
}

// Declarations are validated (by apply too), re-declaring replaces the
// schema and says what it was.
func TestCreateTopicValidatesAndReplaces(t *testing.T) {
	m, _ := v3Machine(t, nil)
	for _, bad := range []*logstorepb.Command{
		declare("", "", kv), declare("a", "a*", kv), declare("", "sh*rd-*", kv), declare("", "shard-", kv),
		declare("bad topic", "", kv), declare("t", "", logstorepb.TopicSchema(9)),
	} {
		if out := m.Apply(m.State().LastIndex()+1, &logstorepb.Entry{Commands: []*logstorepb.Command{bad}}); status.Code(out[0].Err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", bad, out[0].Err)
		}
	}
	if n := m.State().TopicDeclarationCount(); n != 0 {
		t.Fatalf("%d declarations after refusals", n)
	}
	out := m.Apply(10, &logstorepb.Entry{Commands: []*logstorepb.Command{declare("t", "", 0), declare("t", "", kv)}})
	if r := out[0].Resp.(*logstorepb.CreateTopicResponse); !r.Created {
		t.Fatalf("first: %v", r)
	}
	if r := out[1].Resp.(*logstorepb.CreateTopicResponse); r.Created || r.PreviousSchema != schemaBytes {
		t.Fatalf("second: %v, want not created, previous bytes", r)
	}
}

// Declarations survive a snapshot: the restored state has the same rows,
// encodes to the same bytes and applies the same schemas.
func TestTopicDeclarationsSnapshotRoundTrip(t *testing.T) {
	m, _ := v3Machine(t, nil, declare("", "shard-*", kv), declare("orders", "", schemaBytes), declare("", "*", schemaBytes))
	b, err := MarshalState(m.State().ToProto())
	if err != nil {
		t.Fatal(err)
	}
	st, err := UnmarshalState(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := MarshalState(st.ToProto())
	if string(b) != string(b2) {
		t.Fatal("restored state encodes differently")
	}
	if got := st.ToProto().TopicDeclarations; len(got) != 3 || got[0].Pattern != "*" || got[1].Topic != "orders" || got[2].Pattern != "shard-*" {
		t.Fatalf("restored declarations %v", got)
	}
	if s, by := st.TopicSchema("shard-3"); s != kv || by != "shard-*" {
		t.Fatalf("restored shard-3: %v by %q", s, by)
	}
	// A corrupt row is refused, not restored.
	p := m.State().ToProto()
	p.TopicDeclarations = append(p.TopicDeclarations, &logstorepb.TopicDeclaration{Topic: "x", Pattern: "y*", Schema: kv})
	if _, err := StateFromProto(p); err == nil {
		t.Fatal("corrupt declaration restored")
	}
}

// The topic table is capped: a transaction adding topics beyond the
// stamped max_topics is TABLE_FULL naming the cap and writes nothing;
// existing topics are still written. Declarations have their own cap.
func TestTopicCapTableFull(t *testing.T) {
	lim := &logstorepb.ApplyLimits{MaxTopics: 3, MaxTopicDeclarations: 1}
	m, l := v3Machine(t, lim)
	ok := m.Apply(2, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1)})}})
	if ok[0].Err != nil {
		t.Fatal(ok[0].Err)
	}
	out := m.Apply(3, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("c", "d", 1)}), // two new: 4 > 3
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "c", 1)}), // one new: fits
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 1)}), // full, but no new topic
		declare("x", "", kv),
		declare("", "y*", kv),
	}})
	d := apierr.Detail(out[0].Err)
	if status.Code(out[0].Err) != codes.ResourceExhausted || d.GetCode() != logstorepb.ErrorCode_TABLE_FULL || d.Limit != 3 {
		t.Fatalf("beyond the cap: %v (detail %v), want TABLE_FULL limit 3", out[0].Err, d)
	}
	if out[1].Err != nil || out[2].Err != nil || out[3].Err != nil {
		t.Fatalf("within the cap: %v, %v, %v", out[1].Err, out[2].Err, out[3].Err)
	}
	if d := apierr.Detail(out[4].Err); d.GetCode() != logstorepb.ErrorCode_TABLE_FULL || d.Limit != 1 {
		t.Fatalf("declaration beyond its cap: %v", out[4].Err)
	}
	if m.State().NextOffset("d") != 0 || len(l.txns) != 3 || m.State().TopicDeclarationCount() != 1 {
		t.Fatalf("refusals wrote: d at %d, %d txns, %d declarations", m.State().NextOffset("d"), len(l.txns), m.State().TopicDeclarationCount())
	}
}

// Version gate: below TopicsVersion CreateTopic is refused and the topic
// cap is not applied (a version-2 replica knows neither), so a v2 cluster
// applies exactly as before.
func TestTopicsGatedBelowVersion3(t *testing.T) {
	m, l := newTestSM()
	lim := &logstorepb.ApplyLimits{MaxTopics: 1}
	out := m.Apply(1, &logstorepb.Entry{Limits: lim, Commands: []*logstorepb.Command{
		SetClusterVersionCommand(2),
		declare("", "shard-*", kv),
		appendCmd(&logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "shard-0", Messages: []*logstorepb.Message{{Value: []byte("hi")}}}, {Topic: "b", Messages: []*logstorepb.Message{{Value: []byte("x")}}}}}),
	}})
	if apierr.CodeOf(out[1].Err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("CreateTopic at v2: %v, want FEATURE_NOT_ENABLED", out[1].Err)
	}
	if out[2].Err != nil || len(l.txns) != 1 {
		t.Fatalf("append at v2 (two topics, cap 1 stamped): %v, want applied as before", out[2].Err)
	}
}

// TopicPage pages through written and declared topics in name order, each
// exactly once, whatever the page size.
func TestTopicPage(t *testing.T) {
	var cmds []*logstorepb.Command
	var want []string
	for i := range 57 {
		name := fmt.Sprintf("t%03d", i)
		want = append(want, name)
		if i%5 == 0 {
			cmds = append(cmds, declare(name, "", schemaBytes))
		} else {
			cmds = append(cmds, appendCmd(&logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: name, Messages: []*logstorepb.Message{{Value: []byte("x")}}}}}))
		}
	}
	cmds = append(cmds, declare("t001", "", kv), declare("", "t*", kv)) // written and declared: once; a pattern is no topic
	m, _ := v3Machine(t, nil, cmds...)
	st := m.State()
	if n := st.TopicCount(); n != len(want) {
		t.Fatalf("TopicCount %d, want %d", n, len(want))
	}
	for _, size := range []int{1, 7, 57, 100} {
		var got []string
		after := ""
		for {
			names, more := st.TopicPage(after, size)
			if len(names) > size {
				t.Fatalf("page of %d names, limit %d", len(names), size)
			}
			got = append(got, names...)
			if !more {
				break
			}
			after = names[len(names)-1]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("size %d: paged %v", size, got)
		}
	}
}
