package report

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// The lines of logplayer tail: one JSON object per transaction (TxnOf) or
// per topic message (TopicMessageOf).

// TxnLine is a transaction as tail prints it.
type TxnLine struct {
	LSN    uint64      `json:"lsn"`
	Time   string      `json:"time"`
	Slices []SliceLine `json:"slices"`
}

// SliceLine is one topic's slice of a TxnLine.
type SliceLine struct {
	Topic    string        `json:"topic"`
	Offset   uint64        `json:"offset"`
	Messages []MessageLine `json:"messages"`
}

// TopicLine is one message of a topic as tail --topic prints it.
type TopicLine struct {
	Topic  string `json:"topic"`
	Offset uint64 `json:"offset"`
	LSN    uint64 `json:"lsn"`
	Time   string `json:"time"`
	MessageLine
}

// MessageLine shows a message value readably: JSON as it is, a shard
// mutation decoded, UTF-8 text as a string, anything else in base64.
type MessageLine struct {
	Key         string            `json:"key,omitempty"`
	Value       json.RawMessage   `json:"value,omitempty"`
	ValueText   *string           `json:"value_text,omitempty"`
	ValueBase64 string            `json:"value_base64,omitempty"`
	Mutation    *MutationLine     `json:"mutation,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

// MutationLine is a decoded shard mutation.
type MutationLine struct {
	Op    string `json:"op"`
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
}

// MessageOf is m, a message of topic, as a MessageLine.
func MessageOf(topic string, m *logstorepb.Message) MessageLine {
	out := MessageLine{Key: string(m.Key)}
	for _, h := range m.Headers {
		if out.Headers == nil {
			out.Headers = map[string]string{}
		}
		out.Headers[h.Key] = string(h.Value)
	}
	v := m.Value
	switch {
	case len(v) > 0 && json.Valid(v):
		out.Value = json.RawMessage(v)
	case strings.HasPrefix(topic, "shard-") && decodesAsMutation(v, &out):
	case utf8.Valid(v):
		s := string(v)
		out.ValueText = &s
	default:
		out.ValueBase64 = base64.StdEncoding.EncodeToString(v)
	}
	return out
}

func decodesAsMutation(v []byte, out *MessageLine) bool {
	var m shardpb.Mutation
	if proto.Unmarshal(v, &m) != nil || m.Op == shardpb.Mutation_OP_UNSPECIFIED || len(m.Key) == 0 {
		return false
	}
	out.Mutation = &MutationLine{Op: m.Op.String(), Key: string(m.Key), Value: string(m.Value)}
	return true
}

func formatTime(unixNano int64) string {
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339Nano)
}

// TxnOf is t as a TxnLine.
func TxnOf(t *logstorepb.Transaction) TxnLine {
	line := TxnLine{LSN: t.Lsn, Time: formatTime(t.TimestampUnixNano), Slices: []SliceLine{}}
	for _, s := range t.Slices {
		sl := SliceLine{Topic: s.Topic, Offset: s.FirstOffset}
		for _, m := range s.Messages {
			sl.Messages = append(sl.Messages, MessageOf(s.Topic, m))
		}
		line.Slices = append(line.Slices, sl)
	}
	return line
}

// TopicMessageOf is m, a message of topic, as a TopicLine.
func TopicMessageOf(topic string, m *logstorepb.TopicMessage) TopicLine {
	return TopicLine{Topic: topic, Offset: m.Offset, LSN: m.Lsn, Time: formatTime(m.TimestampUnixNano), MessageLine: MessageOf(topic, m.Message)}
}
