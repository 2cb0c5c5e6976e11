// Package mutation is the reference shard's message format and its
// validity rules, pure (no storage, clock or filesystem), so the LogStore's
// deterministic apply core can check a "kv" topic's messages with exactly
// the decoder the shard applies them with.
package mutation

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/shardpb"
)

// MaxKeySize is the longest key a shard stores: bbolt's MaxKeySize (the
// shard package checks they agree; this package cannot import bbolt).
const MaxKeySize = 32768

// ErrMalformed is wrapped by every error about a message value that is not a
// valid Mutation. Applying such a message is refused permanently.
var ErrMalformed = errors.New("malformed mutation")

// Decode decodes and checks one message value. The rules: valid protobuf
// with no unknown fields (a field this build does not know could change the
// meaning), op PUT or DELETE, a key of 1..MaxKeySize bytes, no value on a
// DELETE. Errors wrap ErrMalformed.
func Decode(b []byte) (*shardpb.Mutation, error) {
	var m shardpb.Mutation
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		return nil, fmt.Errorf("%w: unknown fields (a newer producer? upgrade the shard)", ErrMalformed)
	}
	switch {
	case m.Op != shardpb.Mutation_PUT && m.Op != shardpb.Mutation_DELETE:
		return nil, fmt.Errorf("%w: op %v", ErrMalformed, m.Op)
	case len(m.Key) == 0:
		return nil, fmt.Errorf("%w: empty key", ErrMalformed)
	case len(m.Key) > MaxKeySize:
		return nil, fmt.Errorf("%w: key of %d bytes, limit %d", ErrMalformed, len(m.Key), MaxKeySize)
	case m.Op == shardpb.Mutation_DELETE && len(m.Value) > 0:
		return nil, fmt.Errorf("%w: DELETE with a value", ErrMalformed)
	}
	return &m, nil
}
