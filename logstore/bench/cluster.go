package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/poll"
	"github.com/logplayer/logplayer/internal/raftlog"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logstore"
)

// Cluster is 3 in-process LogStore nodes on loopback.
type Cluster struct {
	Nodes  []*logstore.Node
	regs   []*prometheus.Registry // the nodes' metrics
	stores []*serve.Store         // the served nodes, parallel to Nodes
	// https serve the nodes as JSON over HTTP, parallel to Nodes (when
	// LogStoreWALHTTP is measured; with TLS when httpTLS).
	https   []*serve.StoreHTTP
	httpTLS bool
}

// batches sums the leaders' aggregation, AppendBatch and latency
// histograms.
type batches struct {
	txns, entries         float64 // logstore_aggregation_batch_txns: sum, count
	batchReqs, batchCalls float64 // logstore_append_batch_requests: sum, count
	appendSec, appends    float64 // logstore_append_duration_seconds (every code): sum, count
	commitSec, commits    float64 // logstore_raft_commit_duration_seconds: sum, count
}

// batchStats sums the histograms over the nodes (only leaders write
// entries and serve appends).
func (c *Cluster) batchStats() batches {
	var out batches
	for _, reg := range c.regs {
		mfs, err := reg.Gather()
		if err != nil {
			continue
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				sum, count := h.GetSampleSum(), float64(h.GetSampleCount())
				switch mf.GetName() {
				case "logstore_aggregation_batch_txns":
					out.txns, out.entries = out.txns+sum, out.entries+count
				case "logstore_append_batch_requests":
					out.batchReqs, out.batchCalls = out.batchReqs+sum, out.batchCalls+count
				case "logstore_append_duration_seconds":
					out.appendSec, out.appends = out.appendSec+sum, out.appends+count
				case "logstore_raft_commit_duration_seconds":
					out.commitSec, out.commits = out.commitSec+sum, out.commits+count
				}
			}
		}
	}
	return out
}

// leaderStats is what the leader's histograms say of a row.
type leaderStats struct {
	perEntry, perCall float64       // transactions per Raft entry, per gRPC call
	append            time.Duration // mean intake → apply result, per request
	commit            time.Duration // mean raft.Apply → apply result, per entry
}

// since returns the leader's figures between before and b (every command
// of the bench is an Append).
func (b batches) since(before batches) leaderStats {
	var out leaderStats
	txns, entries := b.txns-before.txns, b.entries-before.entries
	batched, batchCalls := b.batchReqs-before.batchReqs, b.batchCalls-before.batchCalls
	if entries > 0 {
		out.perEntry = txns / entries
	}
	if calls := batchCalls + (txns - batched); calls > 0 {
		out.perCall = txns / calls
	}
	mean := func(sum, count float64) time.Duration {
		if count <= 0 {
			return 0
		}
		return time.Duration(sum / count * float64(time.Second))
	}
	out.append = mean(b.appendSec-before.appendSec, b.appends-before.appends)
	out.commit = mean(b.commitSec-before.commitSec, b.commits-before.commits)
	return out
}

// StartCluster starts 3 bootstrapped nodes under dir with default settings
// (fsync on, the default Raft log store) and waits for a leader.
func StartCluster(dir string, logger *slog.Logger) (*Cluster, error) {
	return StartClusterWith(dir, logger, nil)
}

// StartClusterWith is StartCluster with edit applied to each node's config
// (if not nil) before it starts.
func StartClusterWith(dir string, logger *slog.Logger, edit func(*logstore.Config)) (*Cluster, error) {
	return startCluster(dir, logger, nil, nil, edit)
}

// StartClusterSecure is StartCluster with sec's TLS (nil: plaintext).
func StartClusterSecure(dir string, logger *slog.Logger, sec *Security) (*Cluster, error) {
	return startCluster(dir, logger, nil, sec, nil)
}

func startCluster(dir string, logger *slog.Logger, opts []grpc.ServerOption, sec *Security, edit func(*logstore.Config)) (*Cluster, error) {
	var peers []logstore.Peer
	var rls, als []net.Listener
	closeAll := func() {
		for _, l := range append(rls, als...) {
			l.Close()
		}
	}
	for i := range 3 {
		rl, err1 := net.Listen("tcp", "127.0.0.1:0")
		al, err2 := net.Listen("tcp", "127.0.0.1:0")
		if err := errors.Join(err1, err2); err != nil {
			closeAll()
			return nil, err
		}
		rls, als = append(rls, rl), append(als, al)
		peers = append(peers, logstore.Peer{ID: fmt.Sprintf("n%d", i), RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()})
	}
	c := &Cluster{}
	for i, p := range peers {
		reg := prometheus.NewRegistry()
		cfg := logstore.Config{
			ID: p.ID, Dir: filepath.Join(dir, p.ID), RaftAddr: p.RaftAddr, APIAddr: p.APIAddr,
			RaftListener: rls[i], Bootstrap: peers, Logger: logger,
			Registry: reg,
		}
		if edit != nil {
			edit(&cfg)
		}
		nodeOpts := opts
		if sec != nil {
			stream, err := sec.RaftStream(rls[i])
			if err != nil {
				c.Close()
				closeAll()
				return nil, err
			}
			cfg.RaftStream = stream
			nodeOpts = append(append([]grpc.ServerOption(nil), opts...), sec.ServerOptions...)
		}
		st, err := serve.StartStore(cfg, als[i], "", logger, nodeOpts...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes, c.regs, c.stores = append(c.Nodes, st.Node), append(c.regs, reg), append(c.stores, st)
	}
	if err := poll.Until(60*time.Second, "a LogStore leader", func() bool {
		for _, n := range c.Nodes {
			if n.IsLeader() {
				return true
			}
		}
		return false
	}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: no leader: %w", err)
	}
	return c, nil
}

// APIAddrs returns the nodes' gRPC addresses.
func (c *Cluster) APIAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.APIAddr())
	}
	return out
}

// Close stops every node (its HTTP and API servers first).
func (c *Cluster) Close() {
	for _, hs := range c.https {
		hs.Stop()
	}
	for _, st := range c.stores {
		st.Close()
	}
}

// bareRaft is 3 hashicorp/raft instances with raft-wal or raft-boltdb, TCP
// transport, a no-op FSM and raft.DefaultConfig: the reference.
type bareRaft struct {
	rafts  []*raft.Raft
	stores []io.Closer
	trans  []*raft.NetworkTransport
}

// logStore is what both backends are to Raft.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

func openLogStore(dir string, backend logstore.RaftLogStore) (logStore, error) {
	if backend == logstore.RaftLogBoltDB {
		return raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	}
	return raftwal.Open(dir)
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnap{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnap struct{}

func (nopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnap) Release()                          {}

func startBareRaft(dir string, backend logstore.RaftLogStore, logger *slog.Logger) (*bareRaft, error) {
	b := &bareRaft{}
	hl := raftlog.New(logger, 0)
	var servers []raft.Server
	for i := range 3 {
		t, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 10*time.Second, hl)
		if err != nil {
			b.close()
			return nil, err
		}
		b.trans = append(b.trans, t)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("r%d", i)), Address: t.LocalAddr()})
	}
	for i := range 3 {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprint(i)), 0o755); err != nil {
			b.close()
			return nil, err
		}
		st, err := openLogStore(filepath.Join(dir, fmt.Sprint(i)), backend)
		if err != nil {
			b.close()
			return nil, err
		}
		b.stores = append(b.stores, st)
		rc := raft.DefaultConfig()
		rc.LocalID = servers[i].ID
		rc.Logger = hl
		r, err := raft.NewRaft(rc, nopFSM{}, st, st, raft.NewDiscardSnapshotStore(), b.trans[i])
		if err != nil {
			b.close()
			return nil, err
		}
		b.rafts = append(b.rafts, r)
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			b.close()
			return nil, err
		}
	}
	if err := poll.Until(60*time.Second, "a bare raft leader", func() bool { return b.leader().State() == raft.Leader }); err != nil {
		b.close()
		return nil, fmt.Errorf("bench: bare raft has no leader: %w", err)
	}
	return b, nil
}

func (b *bareRaft) leader() *raft.Raft {
	for _, r := range b.rafts {
		if r.State() == raft.Leader {
			return r
		}
	}
	return b.rafts[0] // Apply answers ErrNotLeader: counted as an error
}

func (b *bareRaft) close() {
	for _, r := range b.rafts {
		r.Shutdown().Error()
	}
	for _, t := range b.trans {
		t.Close()
	}
	for _, s := range b.stores {
		s.Close()
	}
}
