package main

import (
	"context"
	"flag"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
)

func init() {
	register(&command{
		name:     "status",
		summary:  "show the cluster: nodes, leader, LSNs, topics, members, consumers",
		synopsis: "[--addr LIST] [--json] [flags]",
		about: `
Asks every node in --addr for its status and prints one row per node (role,
Raft term, commit and applied index, head and first LSN), then, as the leader
(or else any node) sees it: the topics with their offsets, the Raft members
and the delivery consumers (LogPlayer targets) with their acked LSNs, and a
summary of the target registry and LogPlayer groups (logplayer players). With
--player, also the LogPlayer's view of each target (queue state, connected,
last ack, lag in LSNs and seconds, last error), from its admin API.

Exits 1 only when no node answers; an unreachable node is shown as such.`,
		examples: []string{
			"logplayer status",
			"logplayer status --player 127.0.0.1:7420          # with the LogPlayer's targets: state, last ack, lag",
			"logplayer status --addr 10.0.0.1:7400,10.0.0.2:7400,10.0.0.3:7400 --json",
		},
		new: func() runner { return &statusCmd{} },
	})
}

type statusCmd struct {
	conn   clientFlags
	player optAddrValue
	asJSON bool
}

func (c *statusCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.Var(&c.player, "player", "also list the targets of the LogPlayer whose admin API is at this `address`")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object instead of tables")
}

func (c *statusCmd) run(ctx context.Context, s *sys) error {
	cl, err := c.conn.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := c.collect(ctx, cl)
	if err != nil {
		return err
	}
	if c.player.addr != "" {
		if rep.Player, err = c.listTargets(ctx); err != nil {
			return err
		}
	}
	if c.asJSON {
		return writeJSONLine(s.stdout, rep)
	}
	rep.WriteTables(s.stdout)
	return nil
}

// collect asks every node; it fails only when none answers.
func (c *statusCmd) collect(ctx context.Context, cl *client.Client) (*clireport.Status, error) {
	rep, ok, lastErr := clireport.Collect(ctx, cl, c.conn.addrs.items, c.conn.timeout)
	if m := c.conn.tls.mistake("status", "the LogStore at "+c.conn.addrs.String(), lastErr); !ok && m != nil {
		return nil, m
	}
	if code := status.Code(lastErr); !ok && (code == codes.Unauthenticated || code == codes.PermissionDenied) {
		return nil, fmt.Errorf("the LogStore at %s refused status (check --tls-ca, --tls-cert, --token-file): %v", c.conn.addrs.String(), lastErr)
	}
	if !ok {
		return nil, c.conn.unreachable("status", lastErr)
	}
	return rep, nil
}

// listTargets asks the LogPlayer's admin API for its targets.
func (c *statusCmd) listTargets(ctx context.Context) (*clireport.Player, error) {
	cc, err := c.conn.dialOther(c.player.addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	p, err := clireport.ListPlayerTargets(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("cannot list the LogPlayer's targets at %s within %v (is it running? set --player): %v",
			c.player.addr, c.conn.timeout, err)
	}
	return p, nil
}
