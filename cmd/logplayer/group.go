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
		name:     "group delete",
		summary:  "delete a consumer group's committed offsets",
		synopsis: "--group NAME [--addr LIST]",
		about: `
Removes every committed offset of the consumer group (a Raft command, on every
node), freeing its rows in the capped group-offset table. The group's next
reader starts from offset 0, and a transaction that expects one of its old
committed offsets fails its condition: stop the group's workers first.
Deleting an unknown group removes nothing.`,
		examples: []string{"logplayer group delete --group billing"},
		required: []string{"group"},
		new:      func() runner { return &groupCmd{} },
	})
}

type groupCmd struct {
	conn  clientFlags
	group string
}

func (c *groupCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.StringVar(&c.group, "group", "", "the consumer group `name`")
}

func (c *groupCmd) run(ctx context.Context, s *sys) error {
	done, err := call(ctx, s, &c.conn, "group delete", func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
		return clireport.DeleteGroup(ctx, cl, c.group)
	})
	if err == nil {
		fmt.Fprintln(s.stdout, done)
	}
	return err
}
