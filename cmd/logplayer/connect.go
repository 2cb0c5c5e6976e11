package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
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
	tls     tlsClientFlags
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	c.addrs = newAddrList(defaultStoreAddrs...)
	fs.Var(&c.addrs, "addr", "LogStore API `addresses`, comma-separated (any nodes; writes find the leader)")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "give up after this long (retries included)")
	c.tls.register(fs, true)
}

// dial returns a LogStore client; it connects lazily.
func (c *clientFlags) dial(s *sys) (*client.Client, error) {
	opts, err := c.tls.dialOptions()
	if err != nil {
		return nil, err
	}
	return client.New(client.Config{Addrs: c.addrs.items, Logger: s.log, ConnectTimeout: min(c.timeout, client.DefaultConnectTimeout), DialOptions: opts})
}

// dialOther connects to another server (a LogPlayer's admin API, a shard)
// with the same security flags.
func (c *clientFlags) dialOther(addr string) (*grpc.ClientConn, error) {
	opts, err := c.tls.dialOptions()
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return grpc.NewClient(addr, opts...)
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
	if m := c.tls.mistake(what, "the LogStore at "+c.addrs.String(), err); m != nil {
		return m
	}
	if d := apierr.Detail(err); d != nil {
		switch d.Code {
		case logstorepb.ErrorCode_NOT_LEADER, logstorepb.ErrorCode_SHUTTING_DOWN, logstorepb.ErrorCode_TIMEOUT:
		default:
			msg := strings.TrimPrefix(status.Convert(err).Message(), d.Code.String()+": ") // the authorizer's messages name it already
			return fmt.Errorf("%s refused: %s: %s", what, d.Code, msg)
		}
	}
	code := status.Code(err)
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || code == codes.Unavailable || code == codes.DeadlineExceeded {
		return fmt.Errorf("%s failed: cannot reach the LogStore at %s within %v (is the cluster running? set --addr): %v",
			what, strings.Join(c.addrs.items, ","), c.timeout, err)
	}
	return fmt.Errorf("%s failed: %w", what, err)
}

// unreachable is the error of a command none of whose servers answered
// (lastErr the last failure): the TLS mistake that caused it when there
// is one, else "cannot reach".
func (c *clientFlags) unreachable(what string, lastErr error) error {
	if m := c.tls.mistake(what, "the LogStore at "+c.addrs.String(), lastErr); m != nil {
		return m
	}
	return fmt.Errorf("cannot reach the LogStore at %s within %v (is the cluster running? set --addr): %v",
		c.addrs.String(), c.timeout, lastErr)
}
