package schema_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/schema"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// This test binary registers no kv validator: it is a store binary that
// forgot to, and these tests check it refuses and fails loudly instead of
// deciding differently from its peers.

const kv = logstorepb.TopicSchema_TOPIC_SCHEMA_KV

func TestNamesFromTheEnum(t *testing.T) {
	for s, want := range map[logstorepb.TopicSchema]string{
		logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED: "bytes",
		logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES:       "bytes",
		kv:                        "kv",
		logstorepb.TopicSchema(9): "schema(9)",
	} {
		if got := schema.Name(s); got != want {
			t.Errorf("Name(%d) = %q, want %q", s, got, want)
		}
	}
	if got := schema.Names(); strings.Join(got, ",") != "bytes" {
		t.Fatalf("Names() = %v, want only bytes (kv is registered by the binaries)", got)
	}
}

func TestLookupErrors(t *testing.T) {
	if v, err := schema.Lookup(logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED); err != nil || v.Validate([]byte("x")) != nil {
		t.Fatalf("UNSPECIFIED: %v, want bytes accepting anything", err)
	}
	if _, err := schema.Lookup(kv); !errors.Is(err, schema.ErrNotRegistered) || !strings.Contains(err.Error(), "kv") {
		t.Fatalf("kv unregistered: %v, want ErrNotRegistered naming kv", err)
	}
	if _, err := schema.Lookup(9); !errors.Is(err, schema.ErrUnknown) {
		t.Fatalf("schema 9: %v, want ErrUnknown", err)
	}
}

func TestRegisterRefusesWiringBugs(t *testing.T) {
	for _, name := range []string{"bytes", "json", "KV", "unspecified", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			schema.Register(name, schema.Func(func([]byte) error { return nil }))
		}()
	}
}

// CreateTopic for a schema this binary cannot check is refused at the
// edge (fsm.ValidateDeclaration) with INVALID_ARGUMENT naming it.
func TestEdgeRefusesUnregisteredSchema(t *testing.T) {
	err := fsm.ValidateDeclaration(&logstorepb.TopicDeclaration{Pattern: "shard-*", Schema: kv})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "kv") {
		t.Fatalf("got %v, want INVALID_ARGUMENT naming kv", err)
	}
	if err := fsm.ValidateDeclaration(&logstorepb.TopicDeclaration{Topic: "t", Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES}); err != nil {
		t.Fatalf("bytes: %v", err)
	}
}

type nopLog struct{}

func (nopLog) AppendBatch([]*logstorepb.Transaction) error { return nil }

// A committed kv declaration on a replica without the validator panics
// (apply cannot decide what the others decide), while an undefined schema
// number is refused like on every replica.
func TestApplyWithoutValidatorPanics(t *testing.T) {
	m := fsm.NewMachine(fsm.NewState(), nopLog{})
	create := func(s logstorepb.TopicSchema) *logstorepb.Command {
		return &logstorepb.Command{Kind: &logstorepb.Command_CreateTopic{CreateTopic: &logstorepb.CreateTopicRequest{
			Declaration: &logstorepb.TopicDeclaration{Pattern: "shard-*", Schema: s}}}}
	}
	out := m.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{fsm.SetClusterVersionCommand(fsm.TopicsVersion), create(9)}})
	if status.Code(out[1].Err) != codes.InvalidArgument {
		t.Fatalf("schema 9 in apply: %v, want a refusal (INVALID_ARGUMENT)", out[1].Err)
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "kv") {
			t.Fatalf("apply of a kv declaration without a validator: recovered %v, want a panic naming kv", r)
		}
	}()
	m.Apply(2, &logstorepb.Entry{Commands: []*logstorepb.Command{create(kv)}})
}
