package main

// Turning command-line values into messages (append); tail's JSON lines
// are client/report's (lines.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/proto"

	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// messageArg is one --topic TOPIC=VALUE: VALUE is literal text, @FILE, or
// @- for standard input. Never read from the environment or a file.
type messageArgs struct{ items []messageArg }

type messageArg struct{ topic, value string }

func (v *messageArgs) String() string { return "" }
func (v *messageArgs) Set(s string) error {
	topic, value, ok := strings.Cut(s, "=")
	if !ok || topic == "" {
		return fmt.Errorf("want TOPIC=VALUE, TOPIC=@FILE or TOPIC=@-")
	}
	v.items = append(v.items, messageArg{topic: topic, value: value})
	return nil
}
func (*messageArgs) Repeatable() {}
func (*messageArgs) NoEnv()      {}

// mutationArgs is --put TOPIC:KEY=VALUE or --delete TOPIC:KEY (shard
// mutations).
type mutationArgs struct {
	items []mutationArg
	op    shardpb.Mutation_Op
}

type mutationArg struct {
	topic string
	m     *shardpb.Mutation
}

func (v *mutationArgs) String() string { return "" }
func (v *mutationArgs) Set(s string) error {
	topic, rest, ok := strings.Cut(s, ":")
	if !ok || topic == "" || rest == "" {
		if v.op == shardpb.Mutation_PUT {
			return fmt.Errorf("want TOPIC:KEY=VALUE, e.g. shard-0:user/1=alice")
		}
		return fmt.Errorf("want TOPIC:KEY, e.g. shard-0:user/1")
	}
	m := &shardpb.Mutation{Op: v.op, Key: []byte(rest)}
	if v.op == shardpb.Mutation_PUT {
		key, value, ok := strings.Cut(rest, "=")
		if !ok || key == "" {
			return fmt.Errorf("want TOPIC:KEY=VALUE, e.g. shard-0:user/1=alice")
		}
		m.Key, m.Value = []byte(key), []byte(value)
	}
	v.items = append(v.items, mutationArg{topic: topic, m: m})
	return nil
}
func (*mutationArgs) Repeatable() {}
func (*mutationArgs) NoEnv()      {}

// buildSlices groups the messages by topic, in the order topics first appear
// (a topic may appear once per transaction, with several messages).
// Unless raw, every --topic value must be JSON and is sent compacted.
func buildSlices(msgs []messageArg, muts []mutationArg, key []byte, raw bool, stdin io.Reader) ([]*logstorepb.Slice, error) {
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
	for _, a := range msgs {
		value, err := readValue(a.value, stdin, &stdinUsed)
		if err != nil {
			return nil, cli.Usagef("--topic %s: %v", a.topic, err)
		}
		if !raw {
			var buf bytes.Buffer
			if err := json.Compact(&buf, value); err != nil {
				return nil, cli.Usagef("--topic %s: malformed JSON (%v); pass --raw to send bytes as they are", a.topic, err)
			}
			value = buf.Bytes()
		}
		add(a.topic, value)
	}
	for _, m := range muts {
		b, err := proto.Marshal(m.m)
		if err != nil {
			return nil, fmt.Errorf("encode mutation: %w", err)
		}
		add(m.topic, b)
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

// renderMessage is a message as tail shows it (the name the tests use).
var renderMessage = clireport.MessageOf

// writeJSONLine writes v as one line.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}
