package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
)

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
	schema, err := clireport.ParseSchema(c.schema)
	if err != nil {
		return usage(err)
	}
	done, err := call(ctx, s, &c.conn, "topic create", func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
		return clireport.DeclareTopic(ctx, cl, c.topic, c.pattern, schema)
	})
	if err == nil {
		fmt.Fprintln(s.Stdout, done)
	}
	return err
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
	return show(ctx, s, &c.conn, "topic describe", c.asJSON, func(ctx context.Context, cl *client.Client) (clireport.TopicInfo, error) {
		return clireport.DescribeTopic(ctx, cl, c.topic)
	})
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

func (c *topicListCmd) Run(ctx context.Context, s *cli.Sys) error {
	return show(ctx, s, &c.conn, "topic list", c.asJSON, func(ctx context.Context, cl *client.Client) (*clireport.TopicList, error) {
		return clireport.ListTopics(ctx, cl, c.limit)
	})
}
