package logplayer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// lsCluster is a real 3-node LogStore in this process (Raft, fsync on).
type lsCluster struct {
	t      testing.TB
	cfgs   []logstore.Config
	stores []*serve.Store // the served nodes, parallel to nodes
	regs   []*prometheus.Registry
	nodes  []*logstore.Node
}

// startLogStore starts a 3-node LogStore; tweak (optional) adjusts node
// i's config before it starts.
func startLogStore(t testing.TB, tweak ...func(i int, cfg *logstore.Config)) *lsCluster {
	t.Helper()
	c := &lsCluster{t: t}
	var peers []logstore.Peer
	var rls, als []net.Listener
	for i := range 3 {
		rl, err1 := net.Listen("tcp", "127.0.0.1:0")
		al, err2 := net.Listen("tcp", "127.0.0.1:0")
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		rls, als = append(rls, rl), append(als, al)
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()})
	}
	dir := t.TempDir()
	for i, p := range peers {
		cfg := logstore.Config{
			ID: p.ID, Dir: filepath.Join(dir, p.ID), RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, Bootstrap: peers,
			Logger: testLogger(t),
			// Generous timeouts: the machine is shared and -race is slow.
			HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond,
			RetentionInterval: time.Hour,
		}
		for _, f := range tweak {
			f(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
		cfg.RaftListener = rls[i]
		cfg.Registry = prometheus.NewRegistry()
		st, err := serve.StartStore(cfg, als[i], "", cfg.Logger, e2eServerOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes, c.stores = append(c.nodes, st.Node), append(c.stores, st)
		c.regs = append(c.regs, cfg.Registry)
	}
	t.Cleanup(func() {
		for i, n := range c.nodes {
			if n != nil {
				_ = c.stores[i].Close()
			}
		}
	})
	testwait.For(t, testwait.Max, "a LogStore leader", func() bool { return c.leader() >= 0 })
	return c
}

func (c *lsCluster) leader() int {
	for i, n := range c.nodes {
		if n != nil && n.IsLeader() {
			return i
		}
	}
	return -1
}

func (c *lsCluster) addrs() []string {
	var out []string
	for _, cfg := range c.cfgs {
		out = append(out, cfg.APIAddr)
	}
	return out
}

// mainStreamNode returns the node serving exactly one Read stream (the main
// stream, when no recovery runs), or -1.
func (c *lsCluster) mainStreamNode() int {
	for i, n := range c.nodes {
		if n != nil && testmetric.Value(c.t, c.regs[i], "logstore_read_streams", nil) == 1 {
			return i
		}
	}
	return -1
}

func (c *lsCluster) stop(i int) {
	if err := c.stores[i].Close(); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i], c.stores[i] = nil, nil
}

// e2eServerOptions are the LogStore API server's options: the LogPlayer's
// keepalive pings allowed.
func e2eServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(ServerKeepalive)}
}

func (c *lsCluster) restart(i int) {
	c.t.Helper()
	testwait.For(c.t, testwait.Max, fmt.Sprintf("node %d to restart", i), func() bool {
		cfg := c.cfgs[i]
		cfg.Registry = prometheus.NewRegistry()
		st, err := serve.StartStore(cfg, nil, "", cfg.Logger, e2eServerOptions()...)
		if err != nil {
			return false // the old listeners' ports may linger a moment
		}
		c.nodes[i], c.stores[i], c.regs[i] = st.Node, st, cfg.Registry
		return true
	})
}

// head returns the leader's head LSN.
func (c *lsCluster) head() uint64 {
	if i := c.leader(); i >= 0 {
		return uint64(c.nodes[i].HeadLSN())
	}
	return 0
}

// readLog reads the whole committed log through the client.
func readLog(t testing.TB, cl *client.Client, head uint64) []*logstorepb.Transaction {
	t.Helper()
	var out []*logstorepb.Transaction
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cl.Read(ctx, &logstorepb.ReadRequest{FromLsn: 1, ToLsn: head}, func(r *logstorepb.ReadResponse) error {
		out = append(out, r.Transactions...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// producer appends the workload until stopped; failed appends (in doubt
// while a node stops) are simply not counted: the truth is the log.
type producer struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	n    int
}

func startProducer(cl *client.Client, w *workload) *producer {
	p := &producer{stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := cl.Append(ctx, &logstorepb.AppendRequest{Slices: w.next()})
			cancel()
			if err == nil {
				p.mu.Lock()
				p.n++
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func (p *producer) count() int { p.mu.Lock(); defer p.mu.Unlock(); return p.n }

// waitMore waits until n more appends succeeded.
func (p *producer) waitMore(t testing.TB, n int) {
	t.Helper()
	target := p.count() + n
	testwait.For(t, testwait.Max, fmt.Sprintf("%d more appends", n), func() bool { return p.count() >= target })
}

func (p *producer) halt() { close(p.stop); p.wg.Wait() }

// The whole system in one process, with a real 3-node LogStore: under
// continuous load a shard is killed and restarted, the LogStore node serving
// the main stream is stopped (and restarted), the LogPlayer is killed and a
// new one (new epoch) takes over. At the end every shard's bbolt state and
// the recording target's applied sequence equal the log filtered to their
// topics, exactly once, and no target refused a bad delivery.
func TestEndToEndRealLogStore(t *testing.T) {
	ls := startLogStore(t)
	cl, err := client.New(client.Config{Addrs: ls.addrs(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	targets := shardsAndRecorder(t, "shard-0", "shard-2")
	prod := startProducer(cl, newWorkload(7, "shard-0", "shard-1", "shard-2"))
	defer func() {
		select {
		case <-prod.stop:
		default:
			prod.halt()
		}
	}()
	prod.waitMore(t, 50)

	tweak := func(c *Config) { c.LogStore = ls.addrs() }
	pr := startPlayer(t, nil, targets, tweak)
	prod.waitMore(t, 60)

	// A shard dies under load and comes back.
	targets[1].stop()
	prod.waitMore(t, 60)
	targets[1].start()
	prod.waitMore(t, 50)

	// The LogStore node serving the main stream stops, and comes back.
	var node int
	testwait.For(t, testwait.Max, "the main stream's node", func() bool { node = ls.mainStreamNode(); return node >= 0 })
	ls.stop(node)
	prod.waitMore(t, 60)
	ls.restart(node)

	// The LogPlayer dies; a new one (new epoch) takes over.
	pr.stop(t)
	prod.waitMore(t, 60)
	pr2 := startPlayer(t, nil, targets, tweak)
	prod.waitMore(t, 60)
	prod.halt()

	head := ls.head()
	for _, tt := range targets {
		testwait.For(t, testwait.Max, fmt.Sprintf("target %s to apply lsn %d", tt.id, head), func() bool { return tt.applied() >= head })
	}
	if pr2.p.Epoch() <= pr.p.Epoch() {
		t.Errorf("epochs %d then %d", pr.p.Epoch(), pr2.p.Epoch())
	}
	pr2.stop(t)
	log := readLog(t, cl, head)
	if uint64(len(log)) != head {
		t.Fatalf("read %d transactions, head %d", len(log), head)
	}
	checkTargets(t, log, targets...)
	t.Logf("%d transactions, epochs %d and %d", head, pr.p.Epoch(), pr2.p.Epoch())
}
