package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func init() {
	app.Register(&cli.Command{
		Name: "topic create",
		New:  func() cli.Runner { return &topicCreateCmd{} },
	})
	app.Register(&cli.Command{
		Name:     "topic describe",
		Required: []string{"topic"},
		New:      func() cli.Runner { return &topicDescribeCmd{} },
	})
	app.Register(&cli.Command{
		Name: "topic list",
		New:  func() cli.Runner { return &topicListCmd{} },
	})
}

// parseSchema is --schema's value.
func parseSchema(s string) (logstorepb.TopicSchema, error) {
	switch s {
	case "bytes", "":
		return logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES, nil
	case "kv":
		return logstorepb.TopicSchema_TOPIC_SCHEMA_KV, nil
	}
	return 0, cli.Usagef("--schema %q: want kv or bytes", s)
}

type topicCreateCmd struct {
	conn                   cli.ClientFlags
	topic, pattern, schema string
}

func (c *topicCreateCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.StringVar(&c.topic, "topic", "", "the topic `name` to declare")
	fs.StringVar(&c.pattern, "pattern", "", "the topic `pattern` to declare: a name prefix then '*'")
	fs.StringVar(&c.schema, "schema", "bytes", "the messages' `schema`: kv or bytes")
}

func (c *topicCreateCmd) Run(ctx context.Context, s *cli.Sys) error {
	if (c.topic == "") == (c.pattern == "") {
		return cli.Usagef("topic create needs exactly one of --topic and --pattern")
	}
	schema, err := parseSchema(c.schema)
	if err != nil {
		return err
	}
	var resp *logstorepb.CreateTopicResponse
	if err := c.conn.Once(ctx, s, "topic create", func(ctx context.Context, cl *client.Client) (err error) {
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
		fmt.Fprintf(s.Stdout, "declared %s with schema %s\n", what, fsm.SchemaName(schema))
	} else {
		fmt.Fprintf(s.Stdout, "declared %s with schema %s (was %s)\n", what, fsm.SchemaName(schema), fsm.SchemaName(resp.PreviousSchema))
	}
	return nil
}

type topicDescribeCmd struct {
	conn   cli.ClientFlags
	topic  string
	asJSON bool
}

func (c *topicDescribeCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.StringVar(&c.topic, "topic", "", "the topic `name`")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object")
}

func (c *topicDescribeCmd) Run(ctx context.Context, s *cli.Sys) error {
	var info *logstorepb.TopicInfo
	if err := c.conn.Once(ctx, s, "topic describe", func(ctx context.Context, cl *client.Client) (err error) {
		info, err = cl.DescribeTopic(ctx, c.topic)
		return err
	}); err != nil {
		return err
	}
	if c.asJSON {
		return writeJSONLine(s.Stdout, clireport.TopicOf(info))
	}
	clireport.WriteTopics(s.Stdout, []*logstorepb.TopicInfo{info})
	return nil
}

type topicListCmd struct {
	conn   cli.ClientFlags
	limit  uint
	asJSON bool
}

func (c *topicListCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.UintVar(&c.limit, "limit", 0, "list at most `n` topics (0: all)")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object")
}

// errListLimit stops EachTopic at --limit.
var errListLimit = errors.New("limit reached")

func (c *topicListCmd) Run(ctx context.Context, s *cli.Sys) error {
	var infos []*logstorepb.TopicInfo
	out := clireport.TopicList{Topics: []clireport.TopicInfo{}, Patterns: []clireport.Pattern{}}
	var patterns []*logstorepb.TopicDeclaration
	err := c.conn.Once(ctx, s, "topic list", func(ctx context.Context, cl *client.Client) (err error) {
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
		return writeJSONLine(s.Stdout, out)
	}
	clireport.WriteTopics(s.Stdout, infos)
	if out.Truncated {
		fmt.Fprintf(s.Stdout, "(first %d topics; raise --limit for more)\n", c.limit)
	}
	clireport.WritePatterns(s.Stdout, out.Patterns)
	return nil
}
