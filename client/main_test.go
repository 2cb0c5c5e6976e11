package client_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore"
)

var long = flag.Bool("long", false, "run the long fault-injection loops")

// nodeEnv makes the test binary run one LogStore node (nodeSpec as JSON)
// instead of the tests, so crash tests can SIGKILL real node processes.
const nodeEnv = "CLIENT_TESTNODE"

type nodeSpec struct {
	ID, Dir, RaftAddr, APIAddr string
	Peers                      []logstore.Peer
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(nodeEnv); spec != "" {
		os.Exit(runNodeProcess(spec))
	}
	os.Exit(m.Run())
}

// runNodeProcess runs one node until SIGTERM (or SIGKILL, which is the point).
func runNodeProcess(spec string) int {
	var s nodeSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(s.Dir), s.ID+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := nodeConfig(s.ID, s.Dir)
	cfg.Logger = slog.New(slog.NewTextHandler(logf, nil))
	cfg.RaftAddr, cfg.APIAddr, cfg.Bootstrap = s.RaftAddr, s.APIAddr, s.Peers
	cfg.SegmentBytes = 32 << 10
	cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 16, 200*time.Millisecond
	n, err := logstore.NewNode(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	n.Close()
	return 0
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// nodeConfig has generous Raft timeouts for a loaded 2-core machine.
func nodeConfig(id, dir string) logstore.Config {
	return logstore.Config{
		ID: id, Dir: dir, Logger: quietLogger(),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond,
		RetentionInterval: time.Hour,
	}
}

// waitFor polls cond every few ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// cluster is n in-process nodes on 127.0.0.1.
type cluster struct {
	cfgs  []logstore.Config
	nodes []*logstore.Node
}

// startCluster starts n bootstrapped nodes and waits for a leader.
func startCluster(n int, dir string, tweak func(*logstore.Config)) (*cluster, error) {
	c := &cluster{}
	var peers []logstore.Peer
	var lis []net.Listener
	for i := range n {
		rl, err1 := listen()
		al, err2 := listen()
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("listen: %v %v", err1, err2)
		}
		lis = append(lis, rl, al)
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()})
	}
	for i, p := range peers {
		cfg := nodeConfig(p.ID, filepath.Join(dir, p.ID))
		cfg.Bootstrap, cfg.RaftAddr, cfg.APIAddr = peers, p.RaftAddr, p.APIAddr
		if tweak != nil {
			tweak(&cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
		cfg.RaftListener, cfg.APIListener = lis[2*i], lis[2*i+1]
		node, err := logstore.NewNode(cfg)
		if err != nil {
			c.close()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
	}
	end := time.Now().Add(60 * time.Second)
	for c.leader() < 0 {
		if time.Now().After(end) {
			c.close()
			return nil, fmt.Errorf("no leader after 60s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c, nil
}

// newCluster is startCluster for a test, closed at its end.
func newCluster(t testing.TB, n int, tweak func(*logstore.Config)) *cluster {
	t.Helper()
	c, err := startCluster(n, t.TempDir(), tweak)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		if n != nil {
			n.Close()
		}
	}
}

// leader returns the index of the leading node, or -1.
func (c *cluster) leader() int {
	for i, n := range c.nodes {
		if n != nil && n.IsLeader() {
			return i
		}
	}
	return -1
}

func (c *cluster) addrs() []string {
	var out []string
	for _, cfg := range c.cfgs {
		out = append(out, cfg.APIAddr)
	}
	return out
}

// stop closes node i; restart opens it again on the same dir and addresses.
func (c *cluster) stop(t testing.TB, i int) {
	t.Helper()
	if err := c.nodes[i].Close(); err != nil {
		t.Fatal(err)
	}
	c.nodes[i] = nil
}

func (c *cluster) restart(t testing.TB, i int) {
	t.Helper()
	var err error
	waitFor(t, 30*time.Second, "node restart", func() bool {
		c.nodes[i], err = logstore.NewNode(c.cfgs[i])
		return err == nil // the old listeners' ports may linger a moment
	})
}

func newClient(t testing.TB, addrs ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Addrs: addrs, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func newProducer(t testing.TB, cl *client.Client, cfg client.ProducerConfig) *client.Producer {
	t.Helper()
	p, err := cl.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
