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
		name:     "cluster add",
		summary:  "add a LogStore node to the Raft cluster as a voter",
		synopsis: "--id ID --raft-addr HOST:PORT --api-addr HOST:PORT [--addr LIST]",
		about: `
Asks the leader to add a voter. Start the new node first, without --peer, so
it waits to be added; it then receives the log (every retained segment) from
the leader.`,
		examples: []string{
			"logplayer store --id n4 --data-dir data/n4 --raft-addr 127.0.0.1:7413 --api-addr 127.0.0.1:7403 &",
			"logplayer cluster add --id n4 --raft-addr 127.0.0.1:7413 --api-addr 127.0.0.1:7403",
		},
		required: []string{"id", "raft-addr", "api-addr"},
		new:      func() runner { return &clusterCmd{op: "add"} },
	})
	register(&command{
		name:     "cluster remove",
		summary:  "remove a node from the Raft cluster",
		synopsis: "--id ID [--addr LIST]",
		about:    "Asks the leader to remove a server (voter or not) from the Raft configuration.",
		examples: []string{"logplayer cluster remove --id n4"},
		required: []string{"id"},
		new:      func() runner { return &clusterCmd{op: "remove"} },
	})
	register(&command{
		name:     "cluster transfer",
		summary:  "transfer Raft leadership (to --id, or to a node Raft picks)",
		synopsis: "[--id ID] [--addr LIST]",
		about:    "Asks the leader to hand leadership over to --id, or to the most up-to-date follower when --id is not given.",
		examples: []string{"logplayer cluster transfer", "logplayer cluster transfer --id n2"},
		new:      func() runner { return &clusterCmd{op: "transfer"} },
	})
}

type clusterCmd struct {
	op                string
	conn              clientFlags
	id                string
	raftAddr, apiAddr addrValue
}

func (c *clusterCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	switch c.op {
	case "add":
		fs.StringVar(&c.id, "id", "", "the new node's Raft server `id`")
		fs.Var(&c.raftAddr, "raft-addr", "the new node's Raft `address`")
		fs.Var(&c.apiAddr, "api-addr", "the new node's gRPC API `address`")
	case "remove":
		fs.StringVar(&c.id, "id", "", "the Raft server `id` to remove")
	case "transfer":
		fs.StringVar(&c.id, "id", "", "the Raft server `id` to hand leadership to (default: Raft picks)")
	}
}

func (c *clusterCmd) run(ctx context.Context, s *sys) error {
	done, err := call(ctx, s, &c.conn, "cluster "+c.op, func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
		switch c.op {
		case "add":
			return clireport.AddVoter(ctx, cl, c.id, c.raftAddr.addr, c.apiAddr.addr)
		case "remove":
			return clireport.RemoveServer(ctx, cl, c.id)
		}
		return clireport.TransferLeadership(ctx, cl, c.id)
	})
	if err == nil {
		fmt.Fprintln(s.stdout, done)
	}
	return err
}
