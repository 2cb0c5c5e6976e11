package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
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
	schema, err := clireport.ParseSchema(c.schema)
	if err != nil {
		return usage(err)
	}
	done, err := call(ctx, s, &c.conn, "topic create", func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
		return clireport.DeclareTopic(ctx, cl, c.topic, c.pattern, schema)
	})
	if err == nil {
		fmt.Fprintln(s.stdout, done)
	}
	return err
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
	return show(ctx, s, &c.conn, "topic describe", c.asJSON, func(ctx context.Context, cl *client.Client) (clireport.TopicInfo, error) {
		return clireport.DescribeTopic(ctx, cl, c.topic)
	})
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

func (c *topicListCmd) run(ctx context.Context, s *sys) error {
	return show(ctx, s, &c.conn, "topic list", c.asJSON, func(ctx context.Context, cl *client.Client) (*clireport.TopicList, error) {
		return clireport.ListTopics(ctx, cl, c.limit)
	})
}
