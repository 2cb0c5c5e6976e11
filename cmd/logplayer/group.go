package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
)

type groupCmd struct {
	conn  cli.ClientFlags
	group string
}

func (c *groupCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.StringVar(&c.group, "group", "", "the consumer group `name`")
}

func (c *groupCmd) Run(ctx context.Context, s *cli.Sys) error {
	done, err := call(ctx, s, &c.conn, "group delete", func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
		return clireport.DeleteGroup(ctx, cl, c.group)
	})
	if err == nil {
		fmt.Fprintln(s.Stdout, done)
	}
	return err
}
