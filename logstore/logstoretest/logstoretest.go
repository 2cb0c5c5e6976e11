// Package logstoretest starts LogStore clusters for tests of other
// packages: in-process nodes on 127.0.0.1:0 with generous Raft timeouts,
// and real node processes (the test binary re-executing itself) for crash
// tests.
//
// In-process:
//
//	c := logstoretest.Start(t, 3, nil)
//	cl, _ := client.New(client.Config{Addrs: c.Addrs()})
//
// Processes: call logstoretest.MaybeRunNode() first thing in TestMain, then
// NewProcCluster(t, 3, backend) / (*Proc).Kill / (*Proc).Start.
//
// The nodes are served as the binary serves them (internal/serve): an API
// server per node with the node's services, health and reflection.
//
// Goroutines: none of its own besides the nodes' and their servers'.
package logstoretest

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// QuietLogger discards everything.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Config returns a node config with generous timeouts for a loaded 2-core
// machine (heartbeat 500ms, election 1s, lease 500ms), a quiet logger and
// retention effectively off.
func Config(id, dir string) logstore.Config {
	return logstore.Config{
		ID: id, Dir: dir, Logger: QuietLogger(),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond,
		RetentionInterval: time.Hour,
	}
}

// Listen binds 127.0.0.1:0.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Cluster is N in-process nodes, each served on its APIAddr.
type Cluster struct {
	T       testing.TB
	Configs []logstore.Config
	Nodes   []*logstore.Node // nil while stopped
	// ServerOptions are added to each node's API server (interceptors).
	ServerOptions []grpc.ServerOption
	apis          []*serve.StoreAPI // parallel to Nodes
}

// Start bootstraps n nodes (ids n0, n1, …) under t.TempDir(), applies
// tweak to each config, serves each node's API with opts added (fault
// injection interceptors), waits for a leader and closes them at cleanup.
func Start(t testing.TB, n int, tweak func(*logstore.Config), opts ...grpc.ServerOption) *Cluster {
	t.Helper()
	c := &Cluster{T: t, ServerOptions: opts}
	var peers []logstore.Peer
	var raftLis, apiLis []net.Listener
	for i := range n {
		rl, al := Listen(t), Listen(t)
		raftLis, apiLis = append(raftLis, rl), append(apiLis, al)
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()})
	}
	base := t.TempDir()
	for i := range n {
		cfg := Config(peers[i].ID, filepath.Join(base, peers[i].ID))
		cfg.Bootstrap = peers
		cfg.RaftAddr, cfg.APIAddr = peers[i].RaftAddr, peers[i].APIAddr
		if tweak != nil {
			tweak(&cfg)
		}
		c.Configs = append(c.Configs, cfg)
		cfg.RaftListener = raftLis[i]
		st, err := serve.StartStore(cfg, apiLis[i], "", cfg.Logger, c.ServerOptions...)
		if err != nil {
			t.Fatal(err)
		}
		c.Nodes, c.apis = append(c.Nodes, st.Node), append(c.apis, st.API)
	}
	t.Cleanup(c.Close)
	c.WaitLeader()
	return c
}

// Close stops every running node (its API server first). Nodes a test
// appended to Nodes itself are closed too (serve them with Serve).
func (c *Cluster) Close() {
	for i, n := range c.Nodes {
		if n != nil {
			if i < len(c.apis) {
				c.apis[i].Stop()
			}
			n.Close()
		}
	}
}

// WaitLeader waits up to 60s for a leader and returns it.
func (c *Cluster) WaitLeader() *logstore.Node {
	var leader *logstore.Node
	testwait.For(c.T, 60*time.Second, "a leader", func() bool {
		for _, n := range c.Nodes {
			if n != nil && n.IsLeader() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// Stop stops node i's API server and closes the node.
func (c *Cluster) Stop(i int) {
	c.apis[i].Stop()
	if err := c.Nodes[i].Close(); err != nil {
		c.T.Fatal(err)
	}
	c.Nodes[i], c.apis[i] = nil, nil
}

// Restart opens node i again on its dir and addresses and serves it.
func (c *Cluster) Restart(i int) {
	c.T.Helper()
	testwait.For(c.T, 30*time.Second, "node restart", func() bool {
		st, err := serve.StartStore(c.Configs[i], nil, "", c.Configs[i].Logger, c.ServerOptions...)
		if err != nil {
			return false // the old listeners' ports may linger a moment
		}
		c.Nodes[i], c.apis[i] = st.Node, st.API
		return true
	})
}

// Serve serves node n's API on lis as the binary does (with opts added)
// and stops it at t's cleanup, before closing n: for tests that open a
// node themselves (logstore.NewNode) with Config.APIAddr = lis's address.
func Serve(t testing.TB, n *logstore.Node, lis net.Listener, opts ...grpc.ServerOption) {
	api := serve.StartStoreAPI(n, lis, QuietLogger(), opts...)
	t.Cleanup(func() { api.Stop(); n.Close() })
}

// Addrs returns the nodes' API addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, cfg := range c.Configs {
		out = append(out, cfg.APIAddr)
	}
	return out
}

// nodeEnv carries a ProcSpec to a re-executed test binary.
const nodeEnv = "LOGSTORETEST_NODE"

// ProcSpec describes one node process.
type ProcSpec struct {
	ID, Dir, RaftAddr, APIAddr string
	Peers                      []logstore.Peer
	// SegmentBytes, SnapshotThreshold, TrailingLogs: small values make
	// crash tests exercise sealing and snapshots (0: 32 KiB, 64, 16).
	SegmentBytes      int64
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// RaftLogStore is the node's Raft log backend ("": the default).
	RaftLogStore logstore.RaftLogStore
	// AdvertisedVersion is the node's Config.AdvertisedVersion (0: the
	// binary's): a rolling-upgrade test restarts a node with a higher one.
	AdvertisedVersion uint32
	// Recover starts the node with Config.Recover (store --recover).
	Recover bool
	// AllowLegacyProducers is the node's Config.AllowLegacyProducers.
	AllowLegacyProducers bool
}

// RaftLogStores lists every supported Raft log backend, for crash tests
// that must pass on each.
var RaftLogStores = []logstore.RaftLogStore{logstore.RaftLogWAL, logstore.RaftLogBoltDB}

// MaybeRunNode runs a node and exits when the process was started by
// (*Proc).Start; otherwise it returns at once. Call it first in TestMain.
func MaybeRunNode() {
	spec := os.Getenv(nodeEnv)
	if spec == "" {
		return
	}
	os.Exit(runNode(spec))
}

func runNode(spec string) int {
	var s ProcSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(s.Dir), s.ID+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := Config(s.ID, s.Dir)
	cfg.Logger = slog.New(slog.NewTextHandler(logf, nil))
	cfg.RaftAddr, cfg.APIAddr, cfg.Bootstrap = s.RaftAddr, s.APIAddr, s.Peers
	cfg.SegmentBytes, cfg.SnapshotThreshold, cfg.TrailingLogs = s.SegmentBytes, s.SnapshotThreshold, s.TrailingLogs
	cfg.RaftLogStore, cfg.AdvertisedVersion = s.RaftLogStore, s.AdvertisedVersion
	cfg.Recover, cfg.AllowLegacyProducers = s.Recover, s.AllowLegacyProducers
	if cfg.SegmentBytes == 0 {
		cfg.SegmentBytes = 32 << 10
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold, cfg.TrailingLogs = 64, 16
	}
	cfg.SnapshotInterval = 200 * time.Millisecond
	st, err := serve.StartStore(cfg, nil, "", cfg.Logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	st.Close()
	return 0
}

// Proc is one node process.
type Proc struct {
	Spec ProcSpec
	cmd  *exec.Cmd
}

// FreeAddr returns a 127.0.0.1 address that was free a moment ago.
func FreeAddr(t testing.TB) string {
	l := Listen(t)
	defer l.Close()
	return l.Addr().String()
}

// NewProcCluster starts n node processes bootstrapped together on the
// given Raft log backend and kills them at cleanup.
func NewProcCluster(t testing.TB, n int, backend logstore.RaftLogStore) []*Proc {
	return NewProcClusterWith(t, n, backend, nil)
}

// NewProcClusterWith is NewProcCluster with tweak (may be nil) applied to
// each node's spec before it starts.
func NewProcClusterWith(t testing.TB, n int, backend logstore.RaftLogStore, tweak func(*ProcSpec)) []*Proc {
	base := t.TempDir()
	var peers []logstore.Peer
	for i := range n {
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: FreeAddr(t), APIAddr: FreeAddr(t)})
	}
	procs := make([]*Proc, n)
	for i, p := range peers {
		procs[i] = &Proc{Spec: ProcSpec{ID: p.ID, Dir: filepath.Join(base, p.ID), RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, Peers: peers, RaftLogStore: backend}}
		if tweak != nil {
			tweak(&procs[i].Spec)
		}
		procs[i].Start(t)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.Kill()
		}
	})
	return procs
}

// Start runs the test binary as this node (TestMain must call MaybeRunNode).
func (p *Proc) Start(t testing.TB) {
	t.Helper()
	b, err := json.Marshal(p.Spec)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), nodeEnv+"="+string(b))
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// Stop asks the process to shut down (SIGTERM, as an operator's restart
// does) and reaps it.
func (p *Proc) Stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
		p.cmd = nil
	}
}

// Kill SIGKILLs the process and reaps it.
func (p *Proc) Kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		p.cmd = nil
	}
}

// AnsweredAppends returns the Append requests a LogStore call answered
// with success, for interceptors that lose responses: the request of an
// Append, or each request of an AppendBatch whose result is a response
// (the client coalesces concurrent Appends into AppendBatch calls, so
// losing that call's response loses all of them). Nil for other calls.
func AnsweredAppends(req, resp any, err error) []*logstorepb.AppendRequest {
	if err != nil {
		return nil
	}
	switch r := req.(type) {
	case *logstorepb.AppendRequest:
		return []*logstorepb.AppendRequest{r}
	case *logstorepb.AppendBatchRequest:
		br, ok := resp.(*logstorepb.AppendBatchResponse)
		if !ok || len(br.Results) != len(r.Requests) {
			return nil
		}
		var out []*logstorepb.AppendRequest
		for i, res := range br.Results {
			if res.GetResponse() != nil {
				out = append(out, r.Requests[i])
			}
		}
		return out
	}
	return nil
}
