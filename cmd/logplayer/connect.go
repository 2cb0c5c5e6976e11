package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The client commands default to the LogStore nodes of `logplayer dev` on
// its default ports (devcluster's layout from port 7400).
const defaultTimeout = 10 * time.Second

var defaultStoreAddrs = []string{"127.0.0.1:7400", "127.0.0.1:7401", "127.0.0.1:7402"}

// clientFlags are the connection flags of the client commands.
type clientFlags struct {
	addrs   addrList
	timeout time.Duration
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	c.addrs = newAddrList(defaultStoreAddrs...)
	fs.Var(&c.addrs, "addr", "LogStore API `addresses`, comma-separated (any nodes; writes find the leader)")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "give up after this long (retries included)")
}

// dial returns a LogStore client; it connects lazily.
func (c *clientFlags) dial(s *sys) (*client.Client, error) {
	return client.New(client.Config{Addrs: c.addrs.items, Logger: s.log, ConnectTimeout: min(c.timeout, client.DefaultConnectTimeout)})
}

// leaderStatus asks the leader for its status within the timeout; what
// names the command in the error.
func (c *clientFlags) leaderStatus(ctx context.Context, cl *client.Client, what string) (*logstorepb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	st, err := cl.LeaderStatus(ctx)
	if err != nil {
		return nil, c.describe(ctx, what, err)
	}
	return st, nil
}

// describe turns a client error into one line a person can act on; ctx is
// the call's context (ended when the --timeout passed).
func (c *clientFlags) describe(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if d := apierr.Detail(err); d != nil {
		switch d.Code {
		case logstorepb.ErrorCode_NOT_LEADER, logstorepb.ErrorCode_SHUTTING_DOWN, logstorepb.ErrorCode_TIMEOUT:
		default:
			return fmt.Errorf("%s refused: %s: %s", what, d.Code, status.Convert(err).Message())
		}
	}
	code := status.Code(err)
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || code == codes.Unavailable || code == codes.DeadlineExceeded {
		return fmt.Errorf("%s failed: cannot reach the LogStore at %s within %v (is the cluster running? set --addr): %v",
			what, strings.Join(c.addrs.items, ","), c.timeout, err)
	}
	return fmt.Errorf("%s failed: %w", what, err)
}
