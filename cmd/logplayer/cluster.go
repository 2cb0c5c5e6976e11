package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/cli"
)

func init() {
	app.Register(&cli.Command{
		Name:     "cluster add",
		Required: []string{"id", "raft-addr", "api-addr"},
		New:      func() cli.Runner { return &clusterCmd{op: "add"} },
	})
	app.Register(&cli.Command{
		Name:     "cluster remove",
		Required: []string{"id"},
		New:      func() cli.Runner { return &clusterCmd{op: "remove"} },
	})
	app.Register(&cli.Command{
		Name: "cluster transfer",
		New:  func() cli.Runner { return &clusterCmd{op: "transfer"} },
	})
}

type clusterCmd struct {
	op                string
	conn              cli.ClientFlags
	id                string
	raftAddr, apiAddr cli.AddrValue
}

func (c *clusterCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
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

func (c *clusterCmd) Run(ctx context.Context, s *cli.Sys) error {
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.Timeout)
	defer cancel()
	var done string
	switch c.op {
	case "add":
		err, done = cl.AddVoter(ctx, c.id, c.raftAddr.Addr, c.apiAddr.Addr), "added voter "+c.id
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
		return c.conn.Describe(ctx, "cluster "+c.op, err)
	}
	fmt.Fprintln(s.Stdout, done)
	return nil
}

// checkMember fails when --id is not in the leader's Raft configuration.
func (c *clusterCmd) checkMember(ctx context.Context, cl *client.Client) error {
	st, err := c.conn.LeaderStatus(ctx, cl, "cluster "+c.op)
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
