package report

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TopicInfo is one topic in logplayer topic describe's and list's JSON.
type TopicInfo struct {
	Topic       string `json:"topic"`
	Schema      string `json:"schema"`
	DeclaredBy  string `json:"declared_by,omitempty"`
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
}

// TopicOf is t as a report.
func TopicOf(t *logstorepb.TopicInfo) TopicInfo {
	return TopicInfo{Topic: t.Topic, Schema: fsm.SchemaName(t.Schema), DeclaredBy: t.DeclaredBy, FirstOffset: t.FirstOffset, NextOffset: t.NextOffset}
}

// TopicList is logplayer topic list's JSON output.
type TopicList struct {
	Topics   []TopicInfo `json:"topics"`
	Patterns []Pattern   `json:"patterns"`
	// Truncated: --limit stopped the listing before the last topic.
	Truncated bool `json:"truncated,omitempty"`
}

// Pattern is a declared topic pattern and its schema.
type Pattern struct {
	Pattern string `json:"pattern"`
	Schema  string `json:"schema"`
}

// PatternOf is p as a report.
func PatternOf(p *logstorepb.TopicDeclaration) Pattern {
	return Pattern{Pattern: p.Pattern, Schema: fsm.SchemaName(p.Schema)}
}

// WriteTopics prints infos as the topic table.
func WriteTopics(w io.Writer, infos []TopicInfo) {
	tw := table(w)
	fmt.Fprintln(tw, "TOPIC\tSCHEMA\tDECLARED BY\tFIRST OFFSET\tNEXT OFFSET")
	for _, t := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", t.Topic, t.Schema, OrDash(t.DeclaredBy), t.FirstOffset, t.NextOffset)
	}
	tw.Flush()
}

// WriteText prints the topic as a one-topic table.
func (t TopicInfo) WriteText(w io.Writer) error {
	WriteTopics(w, []TopicInfo{t})
	return nil
}

// WriteText prints the topic table, a line when Truncated, and the
// pattern table.
func (l *TopicList) WriteText(w io.Writer) error {
	WriteTopics(w, l.Topics)
	if l.Truncated {
		fmt.Fprintf(w, "(first %d topics; raise --limit for more)\n", len(l.Topics))
	}
	WritePatterns(w, l.Patterns)
	return nil
}

// ParseSchema is a schema's name: bytes (or "") or kv; another name is
// an InputError.
func ParseSchema(s string) (logstorepb.TopicSchema, error) {
	switch s {
	case "bytes", "":
		return logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES, nil
	case "kv":
		return logstorepb.TopicSchema_TOPIC_SCHEMA_KV, nil
	}
	return 0, inputErrorf("--schema %q: want kv or bytes", s)
}

// DeclareTopic declares the topic, or with pattern set the topic pattern,
// with schema (topic create).
func DeclareTopic(ctx context.Context, cl *client.Client, topic, pattern string, schema logstorepb.TopicSchema) (Done, error) {
	resp, err := cl.CreateTopic(ctx, &logstorepb.TopicDeclaration{Topic: topic, Pattern: pattern, Schema: schema})
	if err != nil {
		return "", err
	}
	what := "topic " + topic
	if pattern != "" {
		what = "pattern " + pattern
	}
	if resp.Created {
		return Done(fmt.Sprintf("declared %s with schema %s", what, fsm.SchemaName(schema))), nil
	}
	return Done(fmt.Sprintf("declared %s with schema %s (was %s)", what, fsm.SchemaName(schema), fsm.SchemaName(resp.PreviousSchema))), nil
}

// DescribeTopic is the topic as the leader knows it (topic describe).
func DescribeTopic(ctx context.Context, cl *client.Client, topic string) (TopicInfo, error) {
	info, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		return TopicInfo{}, err
	}
	return TopicOf(info), nil
}

// errListLimit stops EachTopic at ListTopics' limit.
var errListLimit = errors.New("limit reached")

// ListTopics lists every topic in name order, or the first limit (0: all),
// and the declared patterns (topic list).
func ListTopics(ctx context.Context, cl *client.Client, limit uint) (*TopicList, error) {
	out := &TopicList{Topics: []TopicInfo{}, Patterns: []Pattern{}}
	patterns, err := cl.EachTopic(ctx, func(t *logstorepb.TopicInfo) error {
		if limit > 0 && uint(len(out.Topics)) == limit {
			out.Truncated = true
			return errListLimit
		}
		out.Topics = append(out.Topics, TopicOf(t))
		return nil
	})
	if errors.Is(err, errListLimit) {
		// EachTopic returns no patterns when stopped: ask for the first page.
		var resp *logstorepb.ListTopicsResponse
		resp, err = cl.ListTopics(ctx, "", 1)
		patterns = resp.GetPatterns()
	}
	if err != nil {
		return nil, err
	}
	for _, p := range patterns {
		out.Patterns = append(out.Patterns, PatternOf(p))
	}
	return out, nil
}

// WritePatterns prints the pattern table, after an empty line, when there
// is a pattern.
func WritePatterns(w io.Writer, patterns []Pattern) {
	if len(patterns) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := table(w)
	fmt.Fprintln(tw, "PATTERN\tSCHEMA")
	for _, p := range patterns {
		fmt.Fprintf(tw, "%s\t%s\n", p.Pattern, p.Schema)
	}
	tw.Flush()
}
