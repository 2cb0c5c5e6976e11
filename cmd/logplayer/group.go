package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/internal/cli"
)

func init() {
	app.Register(&cli.Command{
		Name:     "group delete",
		Required: []string{"group"},
		New:      func() cli.Runner { return &groupCmd{} },
	})
}

type groupCmd struct {
	conn  cli.ClientFlags
	group string
}

func (c *groupCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.StringVar(&c.group, "group", "", "the consumer group `name`")
}

func (c *groupCmd) Run(ctx context.Context, s *cli.Sys) error {
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.Timeout)
	defer cancel()
	n, err := cl.DeleteGroup(ctx, c.group)
	if err != nil {
		return c.conn.Describe(ctx, "group delete", err)
	}
	fmt.Fprintf(s.Stdout, "deleted %d committed offsets of group %s\n", n, c.group)
	return nil
}
