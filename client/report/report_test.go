package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// The views logplayer prints, checked here rather than only through the
// binary (cmd/logplayer's tests): a change of a table or a JSON line fails
// against testdata/*.golden. go test ./client/report -update rewrites them;
// review the diff.

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

// golden compares got with testdata/name.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}

// jsonLine is v as logplayer prints it with --json.
func jsonLine(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// text is v's WriteText output.
func text(t *testing.T, v View) string {
	t.Helper()
	var buf bytes.Buffer
	if err := v.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func mutation(t *testing.T, m *shardpb.Mutation) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// 2026-12-06T07:20:30.123456789Z
const logTime = int64(1796541630123456789)

func TestMessageOf(t *testing.T) {
	del := mutation(t, &shardpb.Mutation{Op: shardpb.Mutation_DELETE, Key: []byte("user/1")})
	put := mutation(t, &shardpb.Mutation{Op: shardpb.Mutation_PUT, Key: []byte("user/1"), Value: []byte("alice")})
	for _, tc := range []struct {
		name, topic string
		m           *logstorepb.Message
		want        string
	}{
		{"json", "orders", &logstorepb.Message{Key: []byte("k"), Value: []byte(`{"id":1}`)}, `{"key":"k","value":{"id":1}}`},
		{"text", "logs", &logstorepb.Message{Key: []byte("k"), Value: []byte("plain text")}, `{"key":"k","value_text":"plain text"}`},
		{"base64", "blobs", &logstorepb.Message{Key: []byte("k"), Value: []byte{0xff, 0x00}}, `{"key":"k","value_base64":"/wA="}`},
		{"delete", "shard-2", &logstorepb.Message{Key: []byte("k"), Value: del}, `{"key":"k","mutation":{"op":"DELETE","key":"user/1"}}`},
		{"put", "shard-0", &logstorepb.Message{Value: put}, `{"mutation":{"op":"PUT","key":"user/1","value":"alice"}}`},
		// A mutation's bytes outside a shard- topic are not decoded (these
		// happen to be UTF-8).
		{"mutation elsewhere", "orders", &logstorepb.Message{Value: put}, `{"value_text":"\b\u0001\u0012\u0006user/1\u001a\u0005alice"}`},
		// Text in a shard- topic that is no mutation stays text.
		{"shard text", "shard-1", &logstorepb.Message{Value: []byte("hello")}, `{"value_text":"hello"}`},
		{"empty", "orders", &logstorepb.Message{}, `{"value_text":""}`},
		{"headers", "orders", &logstorepb.Message{Value: []byte(`"x"`), Headers: []*logstorepb.Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}},
			`{"value":"x","headers":{"a":"1","b":"2"}}`},
		{"json with spaces", "orders", &logstorepb.Message{Value: []byte(`{"id": 1}`)}, `{"value":{"id":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.TrimSuffix(jsonLine(t, MessageOf(tc.topic, tc.m)), "\n"); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestTailLines: tail's lines for the appends of a `logplayer dev` session
// (JSON, a shard mutation, text, bytes; the binary printed the same lines
// before this package took them over).
func TestTailLines(t *testing.T) {
	put := mutation(t, &shardpb.Mutation{Op: shardpb.Mutation_PUT, Key: []byte("user/1"), Value: []byte("alice")})
	del := mutation(t, &shardpb.Mutation{Op: shardpb.Mutation_DELETE, Key: []byte("user/9")})
	txns := []*logstorepb.Transaction{
		{Lsn: 1, TimestampUnixNano: logTime, Slices: []*logstorepb.TxnSlice{
			{Topic: "orders", Messages: []*logstorepb.Message{{Key: []byte("k1"), Value: []byte(`{"id":1}`)}}},
			{Topic: "shard-0", Messages: []*logstorepb.Message{{Key: []byte("k1"), Value: put}}},
		}},
		{Lsn: 2, TimestampUnixNano: logTime + 1e6, Slices: []*logstorepb.TxnSlice{
			{Topic: "orders", FirstOffset: 1, Messages: []*logstorepb.Message{{Value: []byte(`{"id":2}`)}}},
			{Topic: "logs", Messages: []*logstorepb.Message{{Value: []byte("plain text\n")}}},
		}},
		{Lsn: 3, TimestampUnixNano: logTime + 2e9, Slices: []*logstorepb.TxnSlice{
			{Topic: "blobs", Messages: []*logstorepb.Message{{Value: []byte{0xff, 0x00, 0x01}}}},
			{Topic: "shard-1", Messages: []*logstorepb.Message{{Value: del}}},
		}},
		{Lsn: 4, TimestampUnixNano: logTime}, // no slice of the --filter topics
	}
	var got strings.Builder
	for _, txn := range txns {
		got.WriteString(jsonLine(t, TxnOf(txn)))
	}
	for i, m := range []*logstorepb.TopicMessage{
		{Offset: 0, Lsn: 1, TimestampUnixNano: logTime, Message: &logstorepb.Message{Key: []byte("k1"), Value: []byte(`{"id":1}`)}},
		{Offset: 1, Lsn: 2, TimestampUnixNano: logTime + 1e6, Message: &logstorepb.Message{Value: []byte(`{"id":2}`)}},
	} {
		got.WriteString(jsonLine(t, TopicMessageOf("orders", m)))
		if i == 0 {
			got.WriteString(jsonLine(t, TopicMessageOf("shard-0", &logstorepb.TopicMessage{Offset: 0, Lsn: 1, TimestampUnixNano: logTime, Message: &logstorepb.Message{Value: put}})))
		}
	}
	golden(t, "tail", got.String())
}

func TestSlices(t *testing.T) {
	file := filepath.Join(t.TempDir(), "order.json")
	if err := os.WriteFile(file, []byte("{\n  \"id\": 7,\n  \"items\": [1, 2]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	values := []Value{{"orders", "@" + file}, {"inventory", `{"sku": 1}`}, {"orders", "@-"}}
	puts := []Mutation{{"shard-0", &shardpb.Mutation{Op: shardpb.Mutation_PUT, Key: []byte("k"), Value: []byte("v")}}}
	slices, err := Slices(values, puts, []byte("key1"), false, strings.NewReader(`"from stdin"`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	var order []string
	for _, s := range slices {
		order = append(order, s.Topic)
		for _, m := range s.Messages {
			if string(m.Key) != "key1" {
				t.Fatalf("key %q", m.Key)
			}
			got[s.Topic] = append(got[s.Topic], string(m.Value))
		}
	}
	if strings.Join(order, ",") != "orders,inventory,shard-0" {
		t.Fatalf("topic order %v", order)
	}
	if strings.Join(got["orders"], "|") != `{"id":7,"items":[1,2]}|"from stdin"` || got["inventory"][0] != `{"sku":1}` {
		t.Fatalf("values %q", got)
	}
	var m shardpb.Mutation
	if err := proto.Unmarshal([]byte(got["shard-0"][0]), &m); err != nil || string(m.Key) != "k" || string(m.Value) != "v" {
		t.Fatalf("mutation %v, %v", &m, err)
	}

	raw, err := Slices([]Value{{"logs", "not json"}}, nil, nil, true, nil)
	if err != nil || string(raw[0].Messages[0].Value) != "not json" {
		t.Fatalf("raw: %v %v", raw, err)
	}
	for _, tc := range []struct {
		name   string
		values []Value
		want   string
	}{
		{"malformed JSON", []Value{{"orders", `{"id": 1`}}, "--topic orders: malformed JSON (unexpected end of JSON input); pass --raw to send bytes as they are"},
		{"stdin twice", []Value{{"a", "@-"}, {"b", "@-"}}, "--topic b: standard input (@-) can be read only once"},
		{"missing file", []Value{{"a", "@" + filepath.Join(t.TempDir(), "none")}}, "--topic a: read "},
	} {
		_, err := Slices(tc.values, nil, nil, tc.name != "malformed JSON", strings.NewReader("x"))
		var bad *InputError
		if !errors.As(err, &bad) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want an InputError %q", tc.name, err, tc.want)
		}
	}
}

func TestParseMutation(t *testing.T) {
	for _, tc := range []struct {
		op        shardpb.Mutation_Op
		in        string
		topic     string
		key, val  string
		wantError string
	}{
		{shardpb.Mutation_PUT, "shard-0:user/1=alice", "shard-0", "user/1", "alice", ""},
		{shardpb.Mutation_PUT, "shard-0:user/1=a=b", "shard-0", "user/1", "a=b", ""},
		{shardpb.Mutation_PUT, "shard-0:user/1=", "shard-0", "user/1", "", ""},
		{shardpb.Mutation_DELETE, "shard-1:user/9", "shard-1", "user/9", "", ""},
		{shardpb.Mutation_DELETE, "shard-1:a=b", "shard-1", "a=b", "", ""},
		{shardpb.Mutation_PUT, "shard-0", "", "", "", "want TOPIC:KEY=VALUE, e.g. shard-0:user/1=alice"},
		{shardpb.Mutation_PUT, "shard-0:user/1", "", "", "", "want TOPIC:KEY=VALUE, e.g. shard-0:user/1=alice"},
		{shardpb.Mutation_PUT, "shard-0:=v", "", "", "", "want TOPIC:KEY=VALUE, e.g. shard-0:user/1=alice"},
		{shardpb.Mutation_DELETE, ":k", "", "", "", "want TOPIC:KEY, e.g. shard-0:user/1"},
		{shardpb.Mutation_DELETE, "shard-1:", "", "", "", "want TOPIC:KEY, e.g. shard-0:user/1"},
	} {
		m, err := ParseMutation(tc.op, tc.in)
		if tc.wantError != "" {
			if err == nil || err.Error() != tc.wantError {
				t.Fatalf("%s %q: %v, want %q", tc.op, tc.in, err, tc.wantError)
			}
			continue
		}
		if err != nil || m.Topic != tc.topic || m.Mutation.Op != tc.op || string(m.Mutation.Key) != tc.key || string(m.Mutation.Value) != tc.val {
			t.Fatalf("%s %q: %+v %v", tc.op, tc.in, m, err)
		}
	}
}

func TestParseSchema(t *testing.T) {
	for in, want := range map[string]logstorepb.TopicSchema{"": logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES, "bytes": logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES, "kv": logstorepb.TopicSchema_TOPIC_SCHEMA_KV} {
		if got, err := ParseSchema(in); err != nil || got != want {
			t.Fatalf("%q: %v %v", in, got, err)
		}
	}
	_, err := ParseSchema("json")
	var bad *InputError
	if !errors.As(err, &bad) || err.Error() != `--schema "json": want kv or bytes` {
		t.Fatalf("json: %v", err)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 609762: "595.5KiB", 3 << 30: "3.0GiB", 1 << 60: "1.0EiB"} {
		if got := HumanBytes(n); got != want {
			t.Fatalf("HumanBytes(%d) = %s, want %s", n, got, want)
		}
	}
}

// devStatus is a node of `logplayer dev` after the cmd tests' appends.
func devStatus(id, role string) *logstorepb.StatusResponse {
	return &logstorepb.StatusResponse{
		NodeId: id, Role: role, LeaderId: "n2", RaftTerm: 2, CommitIndex: 36, AppliedIndex: 36, HeadLsn: 6, FirstLsn: 1,
		SegmentBytes: 609762, Epoch: 1,
		Topics: []*logstorepb.TopicStatus{{Topic: "blobs", NextOffset: 1}, {Topic: "orders", NextOffset: 5}, {Topic: "shard-0", NextOffset: 1}},
		Servers: []*logstorepb.Server{
			{Id: "n1", RaftAddress: "127.0.0.1:7410", ApiAddress: "127.0.0.1:7400", Voter: true},
			{Id: "n2", RaftAddress: "127.0.0.1:7411", ApiAddress: "127.0.0.1:7401", Voter: true},
			{Id: "n4", RaftAddress: "127.0.0.1:7413", ApiAddress: "127.0.0.1:7403"},
		},
		Consumers: []*logstorepb.Consumer{{Consumer: "logplayer/events", AckedLsn: 6}, {Consumer: "logplayer/shard-0", AckedLsn: 5}},
	}
}

func TestStatus(t *testing.T) {
	leader := devStatus("n2", "leader")
	tiered := devStatus("n3", "follower")
	tiered.LocalFirstLsn, tiered.TierFirstLsn, tiered.TierLastLsn, tiered.TierUploadedBytes, tiered.TierLagSegments, tiered.TierLagBytes = 4, 1, 3, 2048, 1, 512
	uploading := devStatus("n4", "follower")
	uploading.LocalFirstLsn, uploading.TierLagSegments, uploading.TierLagBytes = 1, 2, 3<<30
	full := devStatus("n2", "leader")
	full.TopicCount, full.TopicsTruncated = 1500, true
	full.RegisteredTargets = 2
	full.PlayerGroups = []*logstorepb.PlayerGroupStatus{{Group: "players", Members: 2, OwnedTargets: 2, Generation: 3, Reassignments: 1}}
	player := &playerpb.ListTargetsResponse{PlayerId: "dev", Epoch: 1, CurrentLsn: 6, Targets: []*playerpb.TargetStatus{
		{Config: &playerpb.TargetConfig{Id: "events", Address: "127.0.0.1:7433", Topics: []string{"orders", "inventory"}}, State: "normal", Connected: true, LastAckLsn: 6, Returns: 1, Epoch: 1},
		{Config: &playerpb.TargetConfig{Id: "shard-0", Address: "127.0.0.1:7430", Topics: []string{"shard-0"}}, State: "catchup", Blocked: true, LastAckLsn: 2, LagEntries: 4, LagSeconds: 1.5, Epoch: 7, LastError: "connection refused"},
	}}
	member := proto.Clone(player).(*playerpb.ListTargetsResponse)
	member.Group = &playerpb.PlayerGroupStatus{Group: "players", MemberId: "p1", Incarnation: "i1", LeaseRemainingNanos: 2_500_000_000, LeaseNanos: 3e9, Generation: 3, Renewals: 40, Lapses: 1, TargetsGained: 2, TargetsLost: 1}
	lapsed := proto.Clone(member).(*playerpb.ListTargetsResponse)
	lapsed.Group.LeaseRemainingNanos, lapsed.Group.LastError = -1e9, "lease lost"
	unreachable := Node{Addr: "127.0.0.1:7402", Error: "rpc error: code = Unavailable desc = connection refused"}

	for _, tc := range []struct {
		name   string
		nodes  []Node
		view   *logstorepb.StatusResponse
		player *playerpb.ListTargetsResponse
	}{
		{"status", []Node{nodeOf("127.0.0.1:7400", devStatus("n1", "follower")), nodeOf("127.0.0.1:7401", leader), unreachable}, leader, nil},
		{"status-tier", []Node{nodeOf("127.0.0.1:7401", leader), nodeOf("127.0.0.1:7402", tiered), nodeOf("127.0.0.1:7403", uploading)}, leader, nil},
		{"status-player", []Node{nodeOf("127.0.0.1:7401", leader)}, full, player},
		{"status-member", []Node{nodeOf("127.0.0.1:7401", leader)}, full, member},
		{"status-lapsed", []Node{nodeOf("127.0.0.1:7401", leader)}, full, lapsed},
		{"status-empty", []Node{nodeOf("127.0.0.1:7401", &logstorepb.StatusResponse{NodeId: "n1", Role: "candidate"})}, &logstorepb.StatusResponse{NodeId: "n1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := statusOf(tc.nodes, tc.view)
			if tc.player != nil {
				rep.Player = PlayerOf(tc.player)
			}
			var buf bytes.Buffer
			rep.WriteTables(&buf)
			golden(t, tc.name, buf.String()+jsonLine(t, rep))
		})
	}
}

func TestTopics(t *testing.T) {
	orders := &logstorepb.TopicInfo{Topic: "orders", Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES, DeclaredBy: "orders", NextOffset: 5}
	shard := &logstorepb.TopicInfo{Topic: "shard-0", Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_KV, DeclaredBy: "shard-*", FirstOffset: 2, NextOffset: 9}
	blobs := &logstorepb.TopicInfo{Topic: "blobs", NextOffset: 1}
	pattern := PatternOf(&logstorepb.TopicDeclaration{Pattern: "shard-*", Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_KV})
	var got strings.Builder
	got.WriteString(text(t, TopicOf(orders)) + jsonLine(t, TopicOf(orders)))
	for _, l := range []*TopicList{
		{Topics: []TopicInfo{TopicOf(blobs), TopicOf(orders), TopicOf(shard)}, Patterns: []Pattern{pattern}},
		{Topics: []TopicInfo{TopicOf(blobs), TopicOf(orders)}, Patterns: []Pattern{pattern}, Truncated: true},
		{Topics: []TopicInfo{}, Patterns: []Pattern{}},
	} {
		got.WriteString("\n" + text(t, l) + jsonLine(t, l))
	}
	golden(t, "topics", got.String())
}

func TestTargetsAndGroups(t *testing.T) {
	shard0 := &logstorepb.RegisteredTarget{Id: "shard-0", Address: "127.0.0.1:7430", Topics: []string{"shard-0"}}
	events := &logstorepb.RegisteredTarget{Id: "events", Address: "10.0.0.5:7510", Topics: []string{"orders", "payments"},
		Options: []*logstorepb.Header{{Key: "batch", Value: []byte("64")}}}
	resp := &logstorepb.ListRegisteredTargetsResponse{
		Targets: []*logstorepb.RegisteredTarget{shard0, events},
		Assignments: []*logstorepb.Assignment{
			{Target: shard0, Group: "players", MemberId: "p1", Token: 3, AssignedUnixNano: logTime},
			{Target: shard0, Group: "backup", Token: 0},
		},
	}
	group := &logstorepb.DescribeGroupResponse{Group: "players", Generation: 3, Reassignments: 1, LeaseNanos: 3e9, LogTimeUnixNano: logTime,
		Members: []*logstorepb.GroupMember{
			{MemberId: "p1", AdminAddress: "127.0.0.1:7420", Incarnation: "i1", JoinedUnixNano: logTime - 60e9, LeaseExpiresUnixNano: logTime + 2_450_000_000, Targets: 1},
			{MemberId: "p2", JoinedUnixNano: logTime - 1e9, LeaseExpiresUnixNano: logTime - 1e8},
		},
		Assignments: []*logstorepb.Assignment{{Target: shard0, MemberId: "p1", Token: 3, AssignedUnixNano: logTime}, {Target: events}},
	}
	var got strings.Builder
	list := TargetList{Targets: TargetsOf(resp, "")}
	got.WriteString(text(t, list) + jsonLine(t, list))
	one := TargetsOf(resp, "events")[0]
	got.WriteString("\n" + text(t, one) + jsonLine(t, one))
	if none := TargetsOf(resp, "nosuch"); len(none) != 0 {
		t.Fatalf("TargetsOf nosuch: %v", none)
	}
	for _, l := range []GroupList{
		{Groups: []Group{GroupOf(group), GroupOf(&logstorepb.DescribeGroupResponse{Group: "idle", LeaseNanos: 3e9})}},
		{Groups: []Group{}},
	} {
		got.WriteString("\n" + text(t, l) + jsonLine(t, l))
	}
	for _, d := range []Done{"registered target t2 at 127.0.0.1:2 (topics c)", `removed target <t&"1">`} {
		got.WriteString("\n" + text(t, d) + jsonLine(t, d))
	}
	golden(t, "registry", got.String())
}

func TestErrors(t *testing.T) {
	if err := refusef("no server %q in the configuration (members: %s)", "n9", "n1, n2"); err.Error() != `no server "n9" in the configuration (members: n1, n2)` {
		t.Fatal(err)
	}
	if err := inputErrorf("--producer: %v", errors.New("bad")); err.Error() != "--producer: bad" {
		t.Fatal(err)
	}
	inner := errors.New("context canceled")
	if err := error(&Stopped{Err: inner}); !errors.Is(err, inner) || err.Error() != "context canceled" {
		t.Fatal(err)
	}
	if d, err := doneUnless("done", errors.New("x")); d != "" || err == nil {
		t.Fatal(d, err)
	}
}

var _ View = Done("")
var _ View = TopicInfo{}
var _ View = (*TopicList)(nil)
var _ View = Target{}
var _ View = TargetList{}
var _ View = GroupList{}
