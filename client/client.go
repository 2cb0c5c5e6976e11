// A Client holds one gRPC connection per node address it knows (the
// configured seeds plus leaders learned from NOT_LEADER errors) and sends
// writes to the node it believes leads. It is safe for concurrent use.
// Node rotation, retries and following the log are internal/storeconn's,
// the access layer the LogPlayer's fetcher uses too. Whether a failed
// request wrote is apierr.AppliedOf's answer (the applied field every
// LogStore error carries), and how far it is retried apierr.Classify's,
// derived from it.
//
// Retries. Every call runs within the caller's context deadline and retries
// with exponential backoff (cenkalti/backoff/v4, capped at
// Config.MaxBackoff) only when a retry cannot write twice:
//   - the server answered NOT_LEADER (the request was refused before Raft;
//     the detail's leader address is tried next), QUEUE_FULL or
//     SHUTTING_DOWN (apierr.NotApplied);
//   - the node could not be reached at all (its connection never became
//     ready, so nothing was sent);
//   - or the request is idempotent: an Append with a producer id (the FSM
//     answers a repeated sequence with the first result), ReportConsumer,
//     FetchOffsets, Status. Then a lost response or a timed-out attempt
//     (apierr.MaybeApplied) is retried too.
//
// A non-idempotent Append whose outcome is unknown (the connection broke
// after sending, the attempt timed out, leadership was lost in flight)
// returns the error: the caller decides (use a producer id to avoid this).
//
// Read follows the log and resumes on another node after a failure from
// read_through_lsn+1: no gap, no duplicate.
//
// Coalescing. Appends running at the same time on one connection travel
// together in AppendBatch calls (see appendBatcher in batch.go): each is
// still its own transaction with its own answer and the retry rules above;
// only the gRPC call is shared. Config.MaxBatchBytes < 0 turns it off.
//
// Goroutines: besides grpc-go's, one short-lived flush goroutine per
// AppendBatch call (it ends when the call answers); Read runs on the
// caller's.
// (The package doc is in doc.go; this describes Client.)

package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/grpcwindow"
	"github.com/logplayer/logplayer/internal/storeconn"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Defaults for Config's zero fields.
const (
	DefaultInitialBackoff = 10 * time.Millisecond
	DefaultMaxBackoff     = 500 * time.Millisecond
	// DefaultAttemptTimeout caps one attempt (within the caller's deadline)
	// so a hung node does not eat the whole deadline of an idempotent call.
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultConnectTimeout is how long an attempt waits for a node's
	// connection to become ready before trying another node.
	DefaultConnectTimeout = 2 * time.Second
	// DefaultCallTimeout is the deadline given to calls whose context has
	// none (every RPC gets a deadline).
	DefaultCallTimeout = 30 * time.Second
	// maxRecvMsgBytes bounds one response (a Read batch holds at least one
	// transaction of up to the server's 4 MiB request limit).
	maxRecvMsgBytes = 64 << 20
)

// Config configures a Client.
type Config struct {
	// Addrs are API addresses of some cluster nodes (at least one).
	Addrs          []string
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	AttemptTimeout time.Duration
	ConnectTimeout time.Duration
	CallTimeout    time.Duration
	// MaxBatchBytes bounds the encoded requests of one AppendBatch call
	// into which concurrent Appends on one connection are coalesced
	// (default DefaultMaxBatchBytes; negative: every Append is its own
	// call). Larger requests always go alone.
	MaxBatchBytes int
	// DialOptions are added to the client's own (insecure credentials,
	// bounded reconnect backoff, 64 MiB receive limit).
	DialOptions []grpc.DialOption
	Logger      *slog.Logger
}

func (c *Config) validate() error {
	if len(c.Addrs) == 0 {
		return errors.New("client: Config.Addrs is empty")
	}
	for _, a := range c.Addrs {
		if a == "" {
			return errors.New("client: empty address in Config.Addrs")
		}
	}
	def := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	def(&c.InitialBackoff, DefaultInitialBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.AttemptTimeout, DefaultAttemptTimeout)
	def(&c.ConnectTimeout, DefaultConnectTimeout)
	def(&c.CallTimeout, DefaultCallTimeout)
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Client talks to a LogStore cluster.
type Client struct {
	cfg Config
	// sc holds the node rotation and the retry rules; node i is mu.addrs[i].
	sc *storeconn.Conn
	mu struct {
		sync.Mutex
		conns map[string]*grpc.ClientConn
		// batchers coalesce the Appends sent on each connection.
		batchers map[*grpc.ClientConn]*appendBatcher
		addrs    []string // seeds, then learned addresses: the nodes of sc
		closed   bool
	}
}

// New returns a Client; it connects lazily.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg}
	c.mu.conns = map[string]*grpc.ClientConn{}
	c.mu.batchers = map[*grpc.ClientConn]*appendBatcher{}
	c.mu.addrs = slices.Clone(cfg.Addrs)
	sc, err := storeconn.New(storeconn.Config{
		Nodes: len(cfg.Addrs), Node: c.node, Resolve: c.nodeOf, Spread: true,
		InitialBackoff: cfg.InitialBackoff, MaxBackoff: cfg.MaxBackoff,
		AttemptTimeout: cfg.AttemptTimeout, CallTimeout: cfg.CallTimeout,
		Logger: cfg.Logger, FailureLevel: slog.LevelDebug,
	})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.sc = sc
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	var errs []error
	for _, cc := range c.mu.conns {
		errs = append(errs, cc.Close())
	}
	c.mu.conns = map[string]*grpc.ClientConn{}
	c.mu.batchers = map[*grpc.ClientConn]*appendBatcher{}
	return errors.Join(errs...)
}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("client: closed")

func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	if cc := c.mu.conns[addr]; cc != nil {
		return cc, nil
	}
	opts := append(append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgBytes)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: c.cfg.ConnectTimeout,
		}),
	}, grpcwindow.DialOptions()...), c.cfg.DialOptions...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", addr, err)
	}
	c.mu.conns[addr] = cc
	c.mu.batchers[cc] = newAppendBatcher(cc, c.cfg.MaxBatchBytes)
	c.nodeOfLocked(addr)
	return cc, nil
}

// nodeOf returns addr's node, adding it (a leader learned from a
// NOT_LEADER answer) when it is new.
func (c *Client) nodeOf(addr string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodeOfLocked(addr), true
}

func (c *Client) nodeOfLocked(addr string) int {
	if i := slices.Index(c.mu.addrs, addr); i >= 0 {
		return i
	}
	c.mu.addrs = append(c.mu.addrs, addr)
	return c.sc.Add() // == len(c.mu.addrs)-1: nodes are only added here
}

// connAt returns the connection of node i.
func (c *Client) connAt(i int) (*grpc.ClientConn, error) {
	return c.conn(c.addrOf(i))
}

// node is storeconn's Config.Node: node i's connection once it is ready
// (within ConnectTimeout).
func (c *Client) node(ctx context.Context, i int) (logstorepb.LogStoreClient, error) {
	cc, err := c.connAt(i)
	if err != nil {
		return nil, err
	}
	if err := storeconn.Ready(ctx, cc, c.cfg.ConnectTimeout); err != nil {
		return nil, err
	}
	return logstorepb.NewLogStoreClient(cc), nil
}

// withDeadline gives ctx the default call deadline when it has none.
func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.CallTimeout)
}

// The retry policies of the client's calls (see apierr.Outcome): a write
// is retried only when it surely did not apply; an idempotent request also
// after an unknown outcome.
var (
	writePolicy      = storeconn.Policy{Name: "write", Retry: apierr.NotApplied, Leader: true}
	idempotentPolicy = storeconn.Policy{Name: "idempotent", Retry: apierr.MaybeApplied, Leader: true}
	readPolicy       = storeconn.StreamPolicy{Name: "read", Retry: apierr.MaybeApplied}
)

// call runs fn on the leader (or, while none is known, on one node after
// another) until it succeeds or fails for good; idempotent allows retrying
// unknown outcomes.
func (c *Client) call(ctx context.Context, idempotent bool, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	p := writePolicy
	if idempotent {
		p = idempotentPolicy
	}
	return c.sc.Call(ctx, p, func(ctx context.Context, node int, _ logstorepb.LogStoreClient) error {
		cc, err := c.connAt(node)
		if err != nil {
			return err
		}
		return fn(ctx, cc)
	})
}

// callRPC is call for one RPC: fn's answer from the attempt that
// succeeded, or the last attempt's error.
func callRPC[T any](ctx context.Context, c *Client, idempotent bool, fn func(ctx context.Context, cc *grpc.ClientConn) (T, error)) (T, error) {
	var out T
	err := c.call(ctx, idempotent, func(ctx context.Context, cc *grpc.ClientConn) error {
		resp, err := fn(ctx, cc)
		if err == nil {
			out = resp
		}
		return err
	})
	return out, err
}

// Append commits one transaction (see logstorepb.AppendRequest). With a
// producer id it is retried until the caller's deadline whatever happens,
// and a retry of a committed sequence returns the first result with
// Duplicate set.
func (c *Client) Append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	var resp *logstorepb.AppendResponse
	err := c.call(ctx, req.ProducerId != "", func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = c.appendOn(ctx, cc, req)
		return err
	})
	return resp, err
}

// appendOn sends one Append on cc, coalesced with the Appends running
// concurrently on it (see appendBatcher).
func (c *Client) appendOn(ctx context.Context, cc *grpc.ClientConn, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	c.mu.Lock()
	b := c.mu.batchers[cc]
	c.mu.Unlock()
	if b == nil { // the client was closed after cc was handed out
		return logstorepb.NewLogStoreClient(cc).Append(ctx, req)
	}
	return b.append(ctx, req)
}

// NextEpoch commits and returns a new LogPlayer epoch. Retried on unknown
// outcomes too: a retry may skip an epoch, which keeps "higher than every
// earlier one".
func (c *Client) NextEpoch(ctx context.Context) (types.Epoch, error) {
	resp, err := callRPC(ctx, c, true, func(ctx context.Context, cc *grpc.ClientConn) (*logstorepb.NextEpochResponse, error) {
		return logstorepb.NewLogStoreClient(cc).NextEpoch(ctx, &logstorepb.NextEpochRequest{})
	})
	return types.Epoch(resp.GetEpoch()), err
}

// ReportConsumer records consumer's durable acked LSN (remove: drop it from
// the retention floor).
func (c *Client) ReportConsumer(ctx context.Context, consumer string, ackedLSN types.LSN, remove bool) error {
	return c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := logstorepb.NewLogStoreClient(cc).ReportConsumer(ctx, &logstorepb.ReportConsumerRequest{Consumer: consumer, AckedLsn: uint64(ackedLSN), Remove: remove})
		return err
	})
}

// FetchOffsets returns group's committed offsets (all topics when topics
// is empty) as known by the leader.
func (c *Client) FetchOffsets(ctx context.Context, group string, topics ...string) ([]*logstorepb.OffsetCommit, error) {
	resp, err := callRPC(ctx, c, true, func(ctx context.Context, cc *grpc.ClientConn) (*logstorepb.FetchOffsetsResponse, error) {
		return logstorepb.NewLogStoreClient(cc).FetchOffsets(ctx, &logstorepb.FetchOffsetsRequest{Group: group, Topics: topics})
	})
	return resp.GetOffsets(), err
}

// DeleteGroup removes every committed offset of group and returns how many
// were removed (see logstorepb's DeleteGroup: stop the group's workers
// first). Retried on unknown outcomes: deleting twice is harmless, but the
// count is then that of the last attempt (0 after a lost answer).
func (c *Client) DeleteGroup(ctx context.Context, group string) (uint64, error) {
	resp, err := callRPC(ctx, c, true, func(ctx context.Context, cc *grpc.ClientConn) (*logstorepb.DeleteGroupResponse, error) {
		return logstorepb.NewLogStoreClient(cc).DeleteGroup(ctx, &logstorepb.DeleteGroupRequest{Group: group})
	})
	return resp.GetRemoved(), err
}

// Status returns the status of the node at addr.
func (c *Client) Status(ctx context.Context, addr string) (*logstorepb.StatusResponse, error) {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	cc, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	return logstorepb.NewLogStoreClient(cc).Status(ctx, &logstorepb.StatusRequest{})
}

// LeaderStatus returns the status of the leader.
func (c *Client) LeaderStatus(ctx context.Context) (*logstorepb.StatusResponse, error) {
	return callRPC(ctx, c, true, leaderStatus)
}

// leaderStatus returns the status of cc's node, or NOT_LEADER naming the
// leader it knows when that node is not the leader.
func leaderStatus(ctx context.Context, cc *grpc.ClientConn) (*logstorepb.StatusResponse, error) {
	st, err := logstorepb.NewLogStoreClient(cc).Status(ctx, &logstorepb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	if st.Role != "leader" {
		return nil, apierr.New(logstorepb.ErrorCode_NOT_LEADER, "not the leader", func(d *logstorepb.ErrorDetail) {
			d.LeaderId, d.LeaderAddress = st.LeaderId, st.LeaderAddress
		})
	}
	return st, nil
}

// AddVoter adds a voter (the leader registers its API address too).
func (c *Client) AddVoter(ctx context.Context, id, raftAddr, apiAddr string) error {
	return c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := logstorepb.NewClusterClient(cc).AddVoter(ctx, &logstorepb.AddVoterRequest{Id: id, RaftAddress: raftAddr, ApiAddress: apiAddr})
		return err
	})
}

// RemoveServer removes a server from the cluster.
func (c *Client) RemoveServer(ctx context.Context, id string) error {
	return c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := logstorepb.NewClusterClient(cc).RemoveServer(ctx, &logstorepb.RemoveServerRequest{Id: id})
		return err
	})
}

// TransferLeadership asks the leader to hand over to id ("" lets Raft pick).
// Not retried on unknown outcomes (a second transfer would move it again).
func (c *Client) TransferLeadership(ctx context.Context, id string) error {
	return c.call(ctx, false, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := logstorepb.NewClusterClient(cc).TransferLeadership(ctx, &logstorepb.TransferLeadershipRequest{Id: id})
		return err
	})
}

// Read streams committed transactions from req.FromLsn (to req.ToLsn, or
// forever when 0) to fn, from any node. After a stream failure it resumes
// on another node from the last read_through_lsn+1, so fn sees every LSN
// once, in order (a response that breaks this is refused: ErrContinuity).
// It returns nil when req.ToLsn is reached, fn's error, a permanent error
// (e.g. OUT_OF_RANGE below retention), or ctx's error. req's deadline-less
// ctx is allowed here: a follow never ends by itself.
func (c *Client) Read(ctx context.Context, req *logstorepb.ReadRequest, fn func(*logstorepb.ReadResponse) error) error {
	r := storeconn.NewLogReader(c.sc, readPolicy, req, nil)
	defer r.Close()
	return storeconn.Drain(ctx, r.Next, func(err error) error { return c.continuityErr(err, r.Node()) }, fn)
}
