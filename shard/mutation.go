package shard

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// ErrMalformed is wrapped by every error about a message value that is not a
// valid Mutation. Applying such a message is refused permanently.
var ErrMalformed = errors.New("malformed mutation")

// EncodePut returns the message value of a PUT of key = value.
func EncodePut(key, value []byte) []byte {
	return mustMarshal(&shardpb.Mutation{Op: shardpb.Mutation_PUT, Key: key, Value: value})
}

// EncodeDelete returns the message value of a DELETE of key.
func EncodeDelete(key []byte) []byte {
	return mustMarshal(&shardpb.Mutation{Op: shardpb.Mutation_DELETE, Key: key})
}

func mustMarshal(m *shardpb.Mutation) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("shard: marshal mutation: %v", err))
	}
	return b
}

// DecodeMutation decodes and checks one message value. The rules: valid
// protobuf with no unknown fields (a field this build does not know could
// change the meaning), op PUT or DELETE, a key of 1..bbolt.MaxKeySize bytes,
// no value on a DELETE. Errors wrap ErrMalformed.
func DecodeMutation(b []byte) (*shardpb.Mutation, error) {
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
	case len(m.Key) > bbolt.MaxKeySize:
		return nil, fmt.Errorf("%w: key of %d bytes, limit %d", ErrMalformed, len(m.Key), bbolt.MaxKeySize)
	case m.Op == shardpb.Mutation_DELETE && len(m.Value) > 0:
		return nil, fmt.Errorf("%w: DELETE with a value", ErrMalformed)
	}
	return &m, nil
}

// ModelApply applies to model the mutations of the slices whose topic is in
// topics, exactly as a shard owning those topics would: the expected state of
// a shard is ModelApply over the committed log in LSN order. Nothing is
// applied when a message of an owned topic is malformed (the shard refuses
// that transaction too); the error names the topic and offset.
func ModelApply(model map[string][]byte, topics []string, txnSlices []*logstorepb.TxnSlice) error {
	var muts []*shardpb.Mutation
	for _, sl := range txnSlices {
		if !slices.Contains(topics, sl.Topic) {
			continue
		}
		for i, msg := range sl.Messages {
			m, err := DecodeMutation(msg.Value)
			if err != nil {
				return fmt.Errorf("topic %q offset %d: %w", sl.Topic, sl.FirstOffset+uint64(i), err)
			}
			muts = append(muts, m)
		}
	}
	for _, m := range muts {
		if m.Op == shardpb.Mutation_PUT {
			model[string(m.Key)] = append([]byte{}, m.Value...)
		} else {
			delete(model, string(m.Key))
		}
	}
	return nil
}
