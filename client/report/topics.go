package report

import (
	"fmt"
	"io"

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
func WriteTopics(w io.Writer, infos []*logstorepb.TopicInfo) {
	tw := table(w)
	fmt.Fprintln(tw, "TOPIC\tSCHEMA\tDECLARED BY\tFIRST OFFSET\tNEXT OFFSET")
	for _, t := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", t.Topic, fsm.SchemaName(t.Schema), OrDash(t.DeclaredBy), t.FirstOffset, t.NextOffset)
	}
	tw.Flush()
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
