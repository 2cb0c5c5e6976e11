package shard

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/shard/mutation"
)

// ErrMalformed is wrapped by every error about a message value that is not a
// valid Mutation. Applying such a message is refused permanently.
var ErrMalformed = mutation.ErrMalformed

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

// DecodeMutation decodes and checks one message value (mutation.Decode:
// the rules a "kv" topic's declaration makes the LogStore check too).
// Errors wrap ErrMalformed.
func DecodeMutation(b []byte) (*shardpb.Mutation, error) { return mutation.Decode(b) }

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
