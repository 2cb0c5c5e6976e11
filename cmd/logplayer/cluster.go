package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
)

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
	done, err := call(ctx, s, &c.conn, "cluster "+c.op, func(ctx context.Context, cl *client.Client) (clireport.Done, error) {
		switch c.op {
		case "add":
			return clireport.AddVoter(ctx, cl, c.id, c.raftAddr.Addr, c.apiAddr.Addr)
		case "remove":
			return clireport.RemoveServer(ctx, cl, c.id)
		}
		return clireport.TransferLeadership(ctx, cl, c.id)
	})
	if err == nil {
		fmt.Fprintln(s.Stdout, done)
	}
	return err
}
