package cli

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

// ClientFlags are the connection flags of the client commands.
type ClientFlags struct {
	Addrs   AddrList
	Timeout time.Duration
	TLS     TLSClientFlags
}

// Register binds the flags.
func (c *ClientFlags) Register(fs *flag.FlagSet) {
	c.Addrs = NewAddrList(defaultStoreAddrs...)
	fs.Var(&c.Addrs, "addr", "LogStore API `addresses`, comma-separated (any nodes; writes find the leader)")
	fs.DurationVar(&c.Timeout, "timeout", defaultTimeout, "give up after this long (retries included)")
	c.TLS.Register(fs, true)
}

// Dial returns a LogStore client; it connects lazily.
func (c *ClientFlags) Dial(s *Sys) (*client.Client, error) {
	opts, err := c.TLS.DialOptions()
	if err != nil {
		return nil, err
	}
	return client.New(client.Config{Addrs: c.Addrs.Items, Logger: s.Log, ConnectTimeout: min(c.Timeout, client.DefaultConnectTimeout), DialOptions: opts})
}

// Once dials the cluster, runs fn within the timeout and describes its
// error as what's (the pattern of every one-call client command).
func (c *ClientFlags) Once(ctx context.Context, s *Sys, what string, fn func(context.Context, *client.Client) error) error {
	cl, err := c.Dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return c.Describe(ctx, what, fn(ctx, cl))
}

// DialOther connects to another server (a LogPlayer's admin API, a shard)
// with the same security flags.
func (c *ClientFlags) DialOther(addr string) (*grpc.ClientConn, error) {
	opts, err := c.TLS.DialOptions()
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return grpc.NewClient(addr, opts...)
}

// LeaderStatus asks the leader for its status within the timeout; what
// names the command in the error.
func (c *ClientFlags) LeaderStatus(ctx context.Context, cl *client.Client, what string) (*logstorepb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	st, err := cl.LeaderStatus(ctx)
	if err != nil {
		return nil, c.Describe(ctx, what, err)
	}
	return st, nil
}

// Describe turns a client error into one line a person can act on; ctx is
// the call's context (ended when the --timeout passed).
func (c *ClientFlags) Describe(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if m := c.TLS.Mistake(what, "the LogStore at "+c.Addrs.String(), err); m != nil {
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
			what, strings.Join(c.Addrs.Items, ","), c.Timeout, err)
	}
	return fmt.Errorf("%s failed: %w", what, err)
}

// Unreachable is the error of a command none of whose servers answered
// (lastErr the last failure): the TLS mistake that caused it when there
// is one, else "cannot reach".
func (c *ClientFlags) Unreachable(what string, lastErr error) error {
	if m := c.TLS.Mistake(what, "the LogStore at "+c.Addrs.String(), lastErr); m != nil {
		return m
	}
	return fmt.Errorf("cannot reach the LogStore at %s within %v (is the cluster running? set --addr): %v",
		c.Addrs.String(), c.Timeout, lastErr)
}
