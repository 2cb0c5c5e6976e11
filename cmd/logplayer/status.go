package main

import (
	"context"
	"flag"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/cli"
)

type statusCmd struct {
	conn   cli.ClientFlags
	player cli.OptAddrValue
	asJSON bool
}

func (c *statusCmd) Flags(fs *flag.FlagSet) {
	c.conn.Register(fs)
	fs.Var(&c.player, "player", "also list the targets of the LogPlayer whose admin API is at this `address`")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object instead of tables")
}

func (c *statusCmd) Run(ctx context.Context, s *cli.Sys) error {
	cl, err := c.conn.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := c.collect(ctx, cl)
	if err != nil {
		return err
	}
	if c.player.Addr != "" {
		if rep.Player, err = c.listTargets(ctx); err != nil {
			return err
		}
	}
	if c.asJSON {
		return writeJSONLine(s.Stdout, rep)
	}
	rep.WriteTables(s.Stdout)
	return nil
}

// collect asks every node; it fails only when none answers.
func (c *statusCmd) collect(ctx context.Context, cl *client.Client) (*clireport.Status, error) {
	rep, ok, lastErr := clireport.Collect(ctx, cl, c.conn.Addrs.Items, c.conn.Timeout)
	if m := c.conn.TLS.Mistake("status", "the LogStore at "+c.conn.Addrs.String(), lastErr); !ok && m != nil {
		return nil, m
	}
	if code := status.Code(lastErr); !ok && (code == codes.Unauthenticated || code == codes.PermissionDenied) {
		return nil, fmt.Errorf("the LogStore at %s refused status (check --tls-ca, --tls-cert, --token-file): %v", c.conn.Addrs.String(), lastErr)
	}
	if !ok {
		return nil, c.conn.Unreachable("status", lastErr)
	}
	return rep, nil
}

// listTargets asks the LogPlayer's admin API for its targets.
func (c *statusCmd) listTargets(ctx context.Context) (*clireport.Player, error) {
	cc, err := c.conn.DialOther(c.player.Addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.Timeout)
	defer cancel()
	p, err := clireport.ListPlayerTargets(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("cannot list the LogPlayer's targets at %s within %v (is it running? set --player): %v",
			c.player.Addr, c.conn.Timeout, err)
	}
	return p, nil
}
