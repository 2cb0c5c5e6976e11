package mutation

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/logstore/schema"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// RegisterSchema makes kv's validator this package's Decode, and a second
// call (a binary and a library both calling it) does nothing.
func TestRegisterSchema(t *testing.T) {
	if _, err := schema.Lookup(logstorepb.TopicSchema_TOPIC_SCHEMA_KV); !errors.Is(err, schema.ErrNotRegistered) {
		t.Fatalf("before RegisterSchema: %v, want ErrNotRegistered", err)
	}
	RegisterSchema()
	RegisterSchema()
	v, err := schema.Lookup(logstorepb.TopicSchema_TOPIC_SCHEMA_KV)
	if err != nil {
		t.Fatal(err)
	}
	good, err := proto.Marshal(&shardpb.Mutation{Op: shardpb.Mutation_PUT, Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(good); err != nil {
		t.Errorf("a PUT: %v", err)
	}
	if err := v.Validate([]byte("not a mutation")); !errors.Is(err, ErrMalformed) {
		t.Errorf("garbage: %v, want ErrMalformed", err)
	}
}
