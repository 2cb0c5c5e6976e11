package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// Sizes of the system under test.
const (
	storeNodes = 3
	shardCount = demo.DefaultShards
)

// Raft timeouts of the store processes: generous, the machine has 2 cores
// shared with other test runs (a missed heartbeat must not look like a dead
// leader).
const (
	raftHeartbeat = time.Second
	raftElection  = 2 * time.Second
)

// playerProgress is the LogPlayer's progress-marker interval: short, so a
// shard without messages in the log's tail still reaches the head quickly.
const playerProgress = 200 * time.Millisecond

// Deadlines of the condition waits (a loaded 2-core machine under -race).
const (
	leaderWait  = 60 * time.Second
	progressMax = 60 * time.Second
	rpcTimeout  = 5 * time.Second
)

// processPhaseAcks is cluster.phaseAcks for processes (about 3 s of load).
const processPhaseAcks = 300

// storeNode is one LogStore node process.
type storeNode struct {
	id, api, raft, metrics string
	proc                   *proc
}

// shardNode is one reference shard process, subscribed to topic id.
type shardNode struct {
	id, addr, metrics, dir string
	proc                   *proc
	client                 shardpb.ShardClient
}

func (s *shardNode) targetID() string    { return s.id }
func (s *shardNode) metricsAddr() string { return s.metrics }

// cluster is the whole system as processes on 127.0.0.1.
type cluster struct {
	t      testing.TB
	dir    string
	stores []*storeNode
	shards []*shardNode
	player *proc
	// retired are LogPlayers replaced by another, not watched by alive.
	retired []*proc
	admin   string // the LogPlayer's admin API address
	// playerMetrics is the LogPlayer's /metrics address, as the test
	// reaches it.
	playerMetrics string
	client        *client.Client
	// phaseAcks is how many more Appends must be acknowledged in each
	// phase of a fault (while a component is down, after it returned):
	// proof that writes go on, and traffic for the LogPlayer to recover.
	phaseAcks int64
	// crashed returns an error naming a component that stopped by itself
	// (nil: all alive); nil checks c's processes.
	crashed func() error
	// tls is the system's mutual-TLS material (tls_test.go).
	tls *e2eTLS
	// group, when set, is a LogPlayer group instead of the one LogPlayer
	// (group_test.go): verify checks every member's metrics, and each
	// target's durable epoch against its last fencing token.
	group *playerGroup
	// events, when set, is the events target process (events_test.go): a
	// target of the group beside the shards, whose file verify checks.
	events *eventsNode
}

// clusterOptions vary startClusterWith.
type clusterOptions struct {
	// noPlayer: start no LogPlayer (the caller starts its own).
	noPlayer bool
	// playerAdmin grants the LogPlayers' identity the admin role too (a
	// group member registers its --target flags in the LogStore).
	playerAdmin bool
	// events starts the events target process too (`logplayer events`,
	// cluster.events).
	events bool
}

// startCluster starts 3 store nodes, waits for a leader, starts the shards,
// then the LogPlayer. Everything is killed at cleanup.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	return startClusterWith(t, clusterOptions{})
}

// startClusterWith is startCluster varied by o.
func startClusterWith(t testing.TB, o clusterOptions) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), phaseAcks: processPhaseAcks}
	tlsDir := filepath.Join(c.dir, "tls")
	c.tls = writeTLS(t, tlsDir, tlsDir, nil)
	if o.playerAdmin {
		addGrant(t, tlsDir, "player", "admin")
	}
	var peers []string
	for i := range storeNodes {
		n := &storeNode{id: fmt.Sprintf("n%d", i+1), api: freeAddr(t), raft: freeAddr(t), metrics: freeAddr(t)}
		peers = append(peers, "--peer", fmt.Sprintf("%s=%s/%s", n.id, n.raft, n.api))
		c.stores = append(c.stores, n)
	}
	for _, n := range c.stores {
		args := []string{"store", "--id", n.id, "--data-dir", filepath.Join(c.dir, n.id),
			"--raft-addr", n.raft, "--api-addr", n.api, "--metrics-addr", n.metrics,
			"--heartbeat-timeout", raftHeartbeat.String(), "--election-timeout", raftElection.String()}
		args = append(args, c.tls.args(n.id)...)
		n.proc = newProc(t, c.dir, n.id, append(args, peers...)...)
		n.proc.start()
	}
	c.connect()

	for i := range shardCount {
		c.addShard(i, build)
	}
	if o.events {
		c.addEvents()
	}
	if !o.noPlayer {
		c.player = c.newPlayer("player")
		c.player.start()
	}
	return c
}

// addShard starts shard i (subscribed to its topic) with bin and adds it
// to c.shards.
func (c *cluster) addShard(i int, bin *builtBinary) *shardNode {
	c.t.Helper()
	return c.addShardAt(i, bin, freeAddr(c.t))
}

// addShardAt is addShard with the shard's API on addr.
func (c *cluster) addShardAt(i int, bin *builtBinary, addr string) *shardNode {
	c.t.Helper()
	s := &shardNode{id: demo.ShardTopic(i), addr: addr, metrics: freeAddr(c.t)}
	s.dir = filepath.Join(c.dir, s.id)
	args := []string{"shard", "--id", s.id, "--addr", s.addr, "--data-dir", s.dir, "--metrics-addr", s.metrics}
	var opts []grpc.DialOption
	if c.tls != nil {
		args, opts = append(args, c.tls.args(s.id)...), c.tls.dialOptions(c.t)
	}
	s.proc = newProc(c.t, c.dir, s.id, args...)
	s.proc.bin = bin
	s.proc.start()
	s.client = shardpb.NewShardClient(dial(c.t, s.addr, opts...))
	c.shards = append(c.shards, s)
	return s
}

// connect makes c's LogStore client, with opts added to its dial options,
// and waits for a leader.
func (c *cluster) connect(opts ...grpc.DialOption) {
	c.t.Helper()
	if c.tls != nil {
		opts = append(c.tls.dialOptions(c.t), opts...)
	}
	cl, err := client.New(client.Config{Addrs: c.storeAddrs(), Logger: quietLogger(), DialOptions: opts})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	c.client = cl
	c.waitLeader("")
}

// playerArgs are the LogPlayer's command line, targets and endpoints aside.
func (c *cluster) playerArgs() []string {
	args := []string{"player", "--id", "e2e-player", "--store", strings.Join(c.storeAddrs(), ","),
		"--progress-interval", playerProgress.String(), "--report-interval", "1s"}
	if c.tls != nil {
		args = append(args, c.tls.args("player")...)
	}
	return args
}

// newPlayer returns a LogPlayer process (not started) named name, with
// every shard as a target and its own admin and metrics endpoints, and
// makes it c's LogPlayer.
func (c *cluster) newPlayer(name string) *proc {
	args := c.playerArgs()
	for _, s := range c.shards {
		args = append(args, "--target", fmt.Sprintf("%s=%s/%s", s.id, s.addr, s.id))
	}
	c.admin, c.playerMetrics = freeAddr(c.t), freeAddr(c.t)
	args = append(args, "--admin-addr", c.admin, "--metrics-addr", c.playerMetrics)
	if c.player != nil {
		c.retired = append(c.retired, c.player)
	}
	c.player = newProc(c.t, c.dir, name, args...)
	return c.player
}

// dial returns a lazily connecting gRPC connection that reconnects quickly
// after its server restarts (grpc-go's default backoff grows to 2 minutes);
// opts (the system's TLS) come after the plaintext default.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	bo := grpcbackoff.DefaultConfig
	bo.MaxDelay = time.Second
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: time.Second})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func (c *cluster) storeAddrs() []string {
	var out []string
	for _, n := range c.stores {
		out = append(out, n.api)
	}
	return out
}

func (c *cluster) procs() []*proc {
	var out []*proc
	if c.player != nil {
		out = append(out, c.player)
	}
	if c.group != nil {
		out = append(out, c.group.procs()...)
	}
	for _, n := range c.stores {
		out = append(out, n.proc)
	}
	for _, s := range c.shards {
		out = append(out, s.proc)
	}
	if c.events != nil {
		out = append(out, c.events.proc)
	}
	return out
}

// allProcs is procs and the retired LogPlayers.
func (c *cluster) allProcs() []*proc { return append(c.procs(), c.retired...) }

// alive returns an error naming a component that stopped by itself (a
// crash: the test only stops processes through proc.kill and
// proc.terminate).
func (c *cluster) alive() error {
	if c.crashed != nil {
		return c.crashed()
	}
	for _, p := range c.procs() {
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited unexpectedly; its log ends:\n%s", p.name, tail(p.log, logTailLines))
		}
	}
	return nil
}

// waitAcked waits until c.phaseAcks more Appends are acknowledged.
func (c *cluster) waitAcked(ld *load) {
	c.t.Helper()
	waitAcked(c.t, ld, c.phaseAcks, c.alive)
}

// waitFor is testwait.ForErr that also fails fast when a process crashed.
func (c *cluster) waitFor(d time.Duration, what string, cond func() error) {
	c.t.Helper()
	testwait.ForErr(c.t, d, what, func() error {
		if err := c.alive(); err != nil {
			c.t.Fatal(err)
		}
		return cond()
	})
}

// status asks one node for its status.
func (c *cluster) status(n *storeNode) (*logstorepb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	return c.client.Status(ctx, n.api)
}

// waitLeader waits until a node other than notID leads and returns it with
// its status.
func (c *cluster) waitLeader(notID string) (*storeNode, *logstorepb.StatusResponse) {
	c.t.Helper()
	var leader *storeNode
	var st *logstorepb.StatusResponse
	c.waitFor(leaderWait, "a LogStore leader", func() error {
		for _, n := range c.stores {
			if n.id == notID {
				continue
			}
			s, err := c.status(n)
			if err == nil && s.Role == "leader" {
				leader, st = n, s
				return nil
			}
		}
		return fmt.Errorf("no leader among the nodes other than %q", notID)
	})
	return leader, st
}

// leaderStatus is the status of the current leader (following redirects).
func (c *cluster) leaderStatus() *logstorepb.StatusResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
	defer cancel()
	st, err := c.client.LeaderStatus(ctx)
	if err != nil {
		c.t.Fatalf("leader status: %v", err)
	}
	return st
}

// leader returns the leader's status and node.
func (c *cluster) leader() (*logstorepb.StatusResponse, *storeNode) {
	c.t.Helper()
	st := c.leaderStatus()
	return st, c.store(st.NodeId)
}

// waitNewLeader waits until a node other than old leads, in a later term
// than was's.
func (c *cluster) waitNewLeader(old *storeNode, was *logstorepb.StatusResponse) {
	c.t.Helper()
	_, now := c.waitLeader(old.id)
	if now.RaftTerm <= was.RaftTerm {
		c.t.Fatalf("new leader %s in term %d, the old one (%s) led term %d", now.NodeId, now.RaftTerm, old.id, was.RaftTerm)
	}
}

// waitRejoined waits until n follows and has applied every entry the
// leader had committed when n came back.
func (c *cluster) waitRejoined(n *storeNode) {
	c.t.Helper()
	commit := c.leaderStatus().CommitIndex
	c.waitFor(leaderWait, n.id+" to rejoin as a follower", func() error {
		s, err := c.status(n)
		if err != nil {
			return err
		}
		if s.Role != "follower" || s.AppliedIndex < commit {
			return fmt.Errorf("%s is %s, applied index %d, want follower at %d", n.id, s.Role, s.AppliedIndex, commit)
		}
		return nil
	})
}

// waitNewEpoch waits until a LogPlayer took an epoch above before.
func (c *cluster) waitNewEpoch(before uint64) {
	c.t.Helper()
	c.waitFor(progressMax, "the restarted LogPlayer's new epoch", func() error {
		if e := c.leaderStatus().Epoch; e <= before {
			return fmt.Errorf("epoch %d, was %d before the restart", e, before)
		}
		return nil
	})
}

// silentMax bounds the wait for the LogPlayer to notice that a target's
// stream went silent (gRPC keepalive: 10 s + 5 s by default).
const silentMax = 90 * time.Second

// mustPlayerMetric reads a LogPlayer series.
func (c *cluster) mustPlayerMetric(name, labels string) float64 {
	c.t.Helper()
	v, err := metricValue(c.playerMetrics, name, labels)
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// waitPlayerMetric waits until the LogPlayer's series name{labels} is above
// was.
func (c *cluster) waitPlayerMetric(d time.Duration, name, labels string, was float64) {
	c.t.Helper()
	c.waitFor(d, fmt.Sprintf("%s{%s} above %v", name, labels, was), func() error {
		v, err := metricValue(c.playerMetrics, name, labels)
		if err == nil && v <= was {
			err = fmt.Errorf("%v", v)
		}
		return err
	})
}

// store returns the node with id.
func (c *cluster) store(id string) *storeNode {
	for _, n := range c.stores {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no store node %q", id)
	return nil
}

// applied returns the shard's applied LSN once it is at least lsn, or an
// error (shard down, or still below).
func (s *shardNode) applied(lsn uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := s.client.WaitApplied(ctx, &shardpb.WaitAppliedRequest{Lsn: lsn})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.id, err)
	}
	if resp.AppliedLsn < lsn {
		return resp.AppliedLsn, fmt.Errorf("%s applied lsn %d, want %d", s.id, resp.AppliedLsn, lsn)
	}
	return resp.AppliedLsn, nil
}

// targetNode is a target process: a shard or the events target.
type targetNode interface {
	watchedTarget
	// applied returns the target's applied LSN once it is at least lsn,
	// or an error (down, or still below).
	applied(lsn uint64) (uint64, error)
}

// targets are c's target processes: the shards, then the events target
// when c has one.
func (c *cluster) targets() []targetNode {
	var out []targetNode
	for _, s := range c.shards {
		out = append(out, s)
	}
	if c.events != nil {
		out = append(out, c.events)
	}
	return out
}

// target returns the target process with id.
func (c *cluster) target(id string) targetNode {
	for _, x := range c.targets() {
		if x.targetID() == id {
			return x
		}
	}
	c.t.Fatalf("no target %q", id)
	return nil
}

// waitTargetsApplied waits until every target applied lsn (its own
// topics' messages up to it, and progress markers past its last message).
func (c *cluster) waitTargetsApplied(lsn uint64) {
	c.t.Helper()
	c.waitFor(progressMax, fmt.Sprintf("every target to apply lsn %d", lsn), func() error {
		for _, s := range c.targets() {
			if _, err := s.applied(lsn); err != nil {
				return err
			}
		}
		return nil
	})
}
