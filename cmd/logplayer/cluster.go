package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/logplayer/logplayer/client"
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
	cl, err := c.conn.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	var done string
	switch c.op {
	case "add":
		err, done = cl.AddVoter(ctx, c.id, c.raftAddr.addr, c.apiAddr.addr), "added voter "+c.id
	case "remove":
		// Raft treats removing an unknown id as done; say it instead.
		if err := c.checkMember(ctx, cl); err != nil {
			return err
		}
		err, done = cl.RemoveServer(ctx, c.id), "removed "+c.id
	case "transfer":
		err, done = cl.TransferLeadership(ctx, c.id), "leadership transferred"
		if c.id != "" {
			done += " to " + c.id
		}
	}
	if err != nil {
		return c.conn.describe(ctx, "cluster "+c.op, err)
	}
	fmt.Fprintln(s.stdout, done)
	return nil
}

// checkMember fails when --id is not in the leader's Raft configuration.
func (c *clusterCmd) checkMember(ctx context.Context, cl *client.Client) error {
	st, err := c.conn.leaderStatus(ctx, cl, "cluster "+c.op)
	if err != nil {
		return err
	}
	var ids []string
	for _, sv := range st.Servers {
		if sv.Id == c.id {
			return nil
		}
		ids = append(ids, sv.Id)
	}
	return fmt.Errorf("cluster %s refused: no server %q in the configuration (members: %s)", c.op, c.id, strings.Join(ids, ", "))
}
