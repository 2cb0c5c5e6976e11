package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/types"
)

// The messages of logplayer append, from its command line, and its
// result line.

// Value is one message given as text: Value is literal text, @FILE, or @-
// for standard input (logplayer append --topic TOPIC=VALUE).
type Value struct{ Topic, Value string }

// Mutation is one shard mutation for Topic (logplayer append --put,
// --delete).
type Mutation struct {
	Topic    string
	Mutation *shardpb.Mutation
}

// ParseMutation reads TOPIC:KEY=VALUE (a PUT) or TOPIC:KEY (a DELETE).
func ParseMutation(op shardpb.Mutation_Op, s string) (Mutation, error) {
	topic, rest, ok := strings.Cut(s, ":")
	if !ok || topic == "" || rest == "" {
		if op == shardpb.Mutation_PUT {
			return Mutation{}, fmt.Errorf("want TOPIC:KEY=VALUE, e.g. shard-0:user/1=alice")
		}
		return Mutation{}, fmt.Errorf("want TOPIC:KEY, e.g. shard-0:user/1")
	}
	m := &shardpb.Mutation{Op: op, Key: []byte(rest)}
	if op == shardpb.Mutation_PUT {
		key, value, ok := strings.Cut(rest, "=")
		if !ok || key == "" {
			return Mutation{}, fmt.Errorf("want TOPIC:KEY=VALUE, e.g. shard-0:user/1=alice")
		}
		m.Key, m.Value = []byte(key), []byte(value)
	}
	return Mutation{Topic: topic, Mutation: m}, nil
}

// Slices groups the messages by topic, in the order topics first appear
// (a topic may appear once per transaction, with several messages), each
// message with key. Unless raw, every Value must be JSON and is sent
// compacted. A value that cannot be read or is not JSON is an InputError.
func Slices(values []Value, muts []Mutation, key []byte, raw bool, stdin io.Reader) ([]*logstorepb.Slice, error) {
	var slices []*logstorepb.Slice
	byTopic := map[string]*logstorepb.Slice{}
	add := func(topic string, value []byte) {
		s := byTopic[topic]
		if s == nil {
			s = &logstorepb.Slice{Topic: topic}
			byTopic[topic] = s
			slices = append(slices, s)
		}
		s.Messages = append(s.Messages, &logstorepb.Message{Value: value, Key: key})
	}
	stdinUsed := false
	for _, a := range values {
		value, err := readValue(a.Value, stdin, &stdinUsed)
		if err != nil {
			return nil, inputErrorf("--topic %s: %v", a.Topic, err)
		}
		if !raw {
			var buf bytes.Buffer
			if err := json.Compact(&buf, value); err != nil {
				return nil, inputErrorf("--topic %s: malformed JSON (%v); pass --raw to send bytes as they are", a.Topic, err)
			}
			value = buf.Bytes()
		}
		add(a.Topic, value)
	}
	for _, m := range muts {
		b, err := proto.Marshal(m.Mutation)
		if err != nil {
			return nil, fmt.Errorf("encode mutation: %w", err)
		}
		add(m.Topic, b)
	}
	return slices, nil
}

// readValue resolves VALUE, @FILE or @-.
func readValue(v string, stdin io.Reader, stdinUsed *bool) ([]byte, error) {
	path, ok := strings.CutPrefix(v, "@")
	switch {
	case !ok:
		return []byte(v), nil
	case path == "-":
		if *stdinUsed {
			return nil, fmt.Errorf("standard input (@-) can be read only once")
		}
		*stdinUsed = true
		return io.ReadAll(stdin)
	default:
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %v", path, err)
		}
		return b, nil
	}
}

// AppendResult is logplayer append's output line.
type AppendResult struct {
	LSN       uint64            `json:"lsn"`
	Offsets   map[string]uint64 `json:"offsets"`
	Duplicate bool              `json:"duplicate,omitempty"`
	// A registered producer's id, epoch and sequence used.
	ProducerID string `json:"producer_id,omitempty"`
	Epoch      uint64 `json:"epoch,omitempty"`
	Sequence   uint64 `json:"sequence,omitempty"`
}

// Append commits req; with producer set, through a client.Producer
// registered as producer (req's ProducerId and Sequence unset), whose
// retries never write twice. A producer name the SDK refuses is an
// InputError.
func Append(ctx context.Context, cl *client.Client, req *logstorepb.AppendRequest, producer string) (*AppendResult, error) {
	if producer != "" {
		return appendRegistered(ctx, cl, req, producer)
	}
	resp, err := cl.Append(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &AppendResult{LSN: resp.Lsn, Offsets: map[string]uint64{}, Duplicate: resp.Duplicate}
	for _, sr := range resp.Slices {
		out.Offsets[sr.Topic] = sr.FirstOffset
	}
	return out, nil
}

func appendRegistered(ctx context.Context, cl *client.Client, req *logstorepb.AppendRequest, producer string) (*AppendResult, error) {
	p, err := cl.NewProducer(client.ProducerConfig{ID: producer, MaxInFlight: 1})
	if err != nil {
		return nil, inputErrorf("--producer: %v", err)
	}
	txn := client.NewTxn()
	for _, sl := range req.Slices {
		txn.AddMessages(sl.Topic, sl.Messages...)
	}
	for _, cond := range req.Conditions {
		txn.Expect(cond.Topic, types.Offset(cond.ExpectedNextOffset))
	}
	res, err := p.Append(ctx, txn)
	if err != nil {
		return nil, err
	}
	id, epoch := p.RegisteredID()
	out := &AppendResult{LSN: uint64(res.LSN), Offsets: map[string]uint64{}, Duplicate: res.Duplicate, ProducerID: id, Epoch: epoch, Sequence: res.Sequence}
	for topic, off := range res.Offsets {
		out.Offsets[topic] = uint64(off)
	}
	return out, nil
}
