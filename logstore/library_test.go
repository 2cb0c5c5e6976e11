package logstore_test

import (
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// TestNodeDoesNotServeItsAPI: NewNode opens storage and Raft but leaves
// the API address to the binary: nothing listens there until it is served.
func TestNodeDoesNotServeItsAPI(t *testing.T) {
	api := logstoretest.FreeAddr(t)
	cfg := testConfig("n0", t.TempDir())
	cfg.RaftListener = listen(t)
	cfg.APIAddr = api
	cfg.Bootstrap = []logstore.Peer{{ID: "n0", RaftAddr: cfg.RaftListener.Addr().String(), APIAddr: api}}
	n, err := logstore.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.APIAddr() != api {
		t.Fatalf("APIAddr %q, want the configured %q", n.APIAddr(), api)
	}
	testwait.For(t, 30*time.Second, "a single voter leads", n.IsLeader)
	lis, err := net.Listen("tcp", api) // free: the node did not bind it
	if err != nil {
		t.Fatalf("the node bound its API address: %v", err)
	}
	logstoretest.Serve(t, n, lis)
	if _, err := newClient(t, api).LeaderStatus(ctxT(t, 30*time.Second)); err != nil {
		t.Fatalf("served node: %v", err)
	}
}

// countingStream is a Raft stream layer that counts its dials: the stand-in
// for a TLS layer given through Config.RaftStream.
type countingStream struct {
	net.Listener
	dials *atomic.Int64
}

func (s countingStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	s.dials.Add(1)
	return net.DialTimeout("tcp", string(addr), timeout)
}

// TestRaftStreamInjected: with Config.RaftStream set, Raft's transport
// dials and accepts through it (the nodes elect a leader and replicate).
func TestRaftStreamInjected(t *testing.T) {
	var dials atomic.Int64
	var raftLis, apiLis []net.Listener
	var peers []logstore.Peer
	for i := range 3 {
		rl, al := listen(t), listen(t)
		raftLis, apiLis = append(raftLis, rl), append(apiLis, al)
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()})
	}
	base := t.TempDir()
	var nodes []*logstore.Node
	for i, p := range peers {
		cfg := testConfig(p.ID, filepath.Join(base, p.ID))
		cfg.RaftStream = countingStream{Listener: raftLis[i], dials: &dials}
		cfg.APIAddr, cfg.Bootstrap = p.APIAddr, peers
		n, err := logstore.NewNode(cfg)
		if err != nil {
			t.Fatal(err)
		}
		logstoretest.Serve(t, n, apiLis[i])
		nodes = append(nodes, n)
		if n.RaftAddr() != p.RaftAddr {
			t.Fatalf("raft addr %q, want the stream layer's %q", n.RaftAddr(), p.RaftAddr)
		}
	}
	cl := newClient(t, peers[0].APIAddr, peers[1].APIAddr, peers[2].APIAddr)
	if _, err := cl.Append(ctxT(t, 60*time.Second), txnReq("via-stream", "a")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "every node applied the append", func() bool {
		for _, n := range nodes {
			if n.HeadLSN() < 1 {
				return false
			}
		}
		return true
	})
	if dials.Load() == 0 {
		t.Fatal("Raft never dialed through the injected stream layer")
	}
}
