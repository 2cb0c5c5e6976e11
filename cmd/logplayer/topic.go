package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func init() {
	register(&command{
		name:     "topic create",
		summary:  "declare a topic (or a topic pattern) with a message schema",
		synopsis: "--topic NAME | --pattern PREFIX* [--schema kv|bytes] [--addr LIST]",
		about: `
Declares a topic, or every topic whose name matches a pattern (a name prefix
then '*': "shard-*"; "*" alone is every topic), with the schema its messages
must match: bytes (anything, what an undeclared topic is) or kv (each message
value is one reference-shard mutation, checked with the shard's own decoder).
An Append with a message that does not match is refused with SCHEMA_MISMATCH
(naming the topic and the message's index) and writes nothing. A topic's schema
is its own declaration's, else the longest matching pattern's, else bytes.
Declaring again replaces the schema. A Raft command (admin; cluster version 3).`,
		examples: []string{
			"logplayer topic create --pattern 'shard-*' --schema kv",
			"logplayer topic create --topic orders --schema bytes",
		},
		new: func() runner { return &topicCreateCmd{} },
	})
	register(&command{
		name:     "topic describe",
		summary:  "show a topic's schema and offsets",
		synopsis: "--topic NAME [--addr LIST] [--json]",
		about: `
Shows the topic as the leader knows it: its effective schema, the declaration
that gives it (the topic itself, a pattern, or none), its oldest retained and
next offsets. A topic never written and not declared is UNKNOWN_TOPIC.`,
		examples: []string{"logplayer topic describe --topic shard-0"},
		required: []string{"topic"},
		new:      func() runner { return &topicDescribeCmd{} },
	})
	register(&command{
		name:     "topic list",
		summary:  "list the topics and the topic patterns",
		synopsis: "[--limit N] [--addr LIST] [--json]",
		about: `
Lists every topic (written, or declared by name) in name order with its schema
and offsets, then the declared patterns. The LogStore answers in pages
(ListTopics); this command reads all of them, or stops after --limit topics.`,
		examples: []string{"logplayer topic list", "logplayer topic list --json"},
		new:      func() runner { return &topicListCmd{} },
	})
}

// once dials the cluster, runs fn within the timeout and describes its
// error as what's (the pattern of every one-call client command).
func (c *clientFlags) once(ctx context.Context, s *sys, what string, fn func(context.Context, *client.Client) error) error {
	cl, err := c.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.describe(ctx, what, fn(ctx, cl))
}

// parseSchema is --schema's value.
func parseSchema(s string) (logstorepb.TopicSchema, error) {
	switch s {
	case "bytes", "":
		return logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES, nil
	case "kv":
		return logstorepb.TopicSchema_TOPIC_SCHEMA_KV, nil
	}
	return 0, usagef("--schema %q: want kv or bytes", s)
}

type topicCreateCmd struct {
	conn                   clientFlags
	topic, pattern, schema string
}

func (c *topicCreateCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.StringVar(&c.topic, "topic", "", "the topic `name` to declare")
	fs.StringVar(&c.pattern, "pattern", "", "the topic `pattern` to declare: a name prefix then '*'")
	fs.StringVar(&c.schema, "schema", "bytes", "the messages' `schema`: kv or bytes")
}

func (c *topicCreateCmd) run(ctx context.Context, s *sys) error {
	if (c.topic == "") == (c.pattern == "") {
		return usagef("topic create needs exactly one of --topic and --pattern")
	}
	schema, err := parseSchema(c.schema)
	if err != nil {
		return err
	}
	var resp *logstorepb.CreateTopicResponse
	if err := c.conn.once(ctx, s, "topic create", func(ctx context.Context, cl *client.Client) (err error) {
		resp, err = cl.CreateTopic(ctx, &logstorepb.TopicDeclaration{Topic: c.topic, Pattern: c.pattern, Schema: schema})
		return err
	}); err != nil {
		return err
	}
	what := "topic " + c.topic
	if c.pattern != "" {
		what = "pattern " + c.pattern
	}
	if resp.Created {
		fmt.Fprintf(s.stdout, "declared %s with schema %s\n", what, fsm.SchemaName(schema))
	} else {
		fmt.Fprintf(s.stdout, "declared %s with schema %s (was %s)\n", what, fsm.SchemaName(schema), fsm.SchemaName(resp.PreviousSchema))
	}
	return nil
}

type topicDescribeCmd struct {
	conn   clientFlags
	topic  string
	asJSON bool
}

func (c *topicDescribeCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.StringVar(&c.topic, "topic", "", "the topic `name`")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object")
}

func (c *topicDescribeCmd) run(ctx context.Context, s *sys) error {
	var info *logstorepb.TopicInfo
	if err := c.conn.once(ctx, s, "topic describe", func(ctx context.Context, cl *client.Client) (err error) {
		info, err = cl.DescribeTopic(ctx, c.topic)
		return err
	}); err != nil {
		return err
	}
	if c.asJSON {
		return writeJSONLine(s.stdout, clireport.TopicOf(info))
	}
	clireport.WriteTopics(s.stdout, []*logstorepb.TopicInfo{info})
	return nil
}

type topicListCmd struct {
	conn   clientFlags
	limit  uint
	asJSON bool
}

func (c *topicListCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.UintVar(&c.limit, "limit", 0, "list at most `n` topics (0: all)")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object")
}

// errListLimit stops EachTopic at --limit.
var errListLimit = errors.New("limit reached")

func (c *topicListCmd) run(ctx context.Context, s *sys) error {
	var infos []*logstorepb.TopicInfo
	out := clireport.TopicList{Topics: []clireport.TopicInfo{}, Patterns: []clireport.Pattern{}}
	var patterns []*logstorepb.TopicDeclaration
	err := c.conn.once(ctx, s, "topic list", func(ctx context.Context, cl *client.Client) (err error) {
		patterns, err = cl.EachTopic(ctx, func(t *logstorepb.TopicInfo) error {
			if c.limit > 0 && uint(len(infos)) == c.limit {
				out.Truncated = true
				return errListLimit
			}
			infos = append(infos, t)
			return nil
		})
		if errors.Is(err, errListLimit) {
			// EachTopic returns no patterns when stopped: ask for the first page.
			var resp *logstorepb.ListTopicsResponse
			resp, err = cl.ListTopics(ctx, "", 1)
			patterns = resp.GetPatterns()
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, t := range infos {
		out.Topics = append(out.Topics, clireport.TopicOf(t))
	}
	for _, p := range patterns {
		out.Patterns = append(out.Patterns, clireport.PatternOf(p))
	}
	if c.asJSON {
		return writeJSONLine(s.stdout, out)
	}
	clireport.WriteTopics(s.stdout, infos)
	if out.Truncated {
		fmt.Fprintf(s.stdout, "(first %d topics; raise --limit for more)\n", c.limit)
	}
	clireport.WritePatterns(s.stdout, out.Patterns)
	return nil
}
