package logstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/grpcedge"
	"github.com/logplayer/logplayer/internal/grpcwindow"
	"github.com/logplayer/logplayer/internal/raftlog"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/api"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/logstore/tier"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// raftLogCacheEntries is how many recent Raft entries stay in memory for
// replication and apply: MaxAppendEntries (16) several times over, so a
// follower that is a few batches behind is still served from memory. An
// entry is at most MaxBatchBytes (1 MiB, plus one request over it), and
// the cache holds the same slices the FSM and the futures hold anyway.
const raftLogCacheEntries = 64

// Node is one LogStore server: Raft, FSM, segment log and aggregator, a
// library: NewNode starts it, Close stops it. It does not listen for its
// API: the binary registers its gRPC services (RegisterServices) on a
// server it runs, with ServerOptions, and serves Registry's metrics
// (internal/serve does both).
type Node struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	seg       *segment.Log
	tier      *tier.Tier // nil without Config.Tier (tiering.go)
	snaps     *snapshotStore
	fsm       *raftFSM
	raftStore raftStore    // Raft log + stable store (Config.RaftLogStore)
	stable    *stableGuard // raftStore's stable half as Raft sees it
	transport *raftTransport
	raft      *raft.Raft
	agg       *api.Aggregator
	// edge are the edge's metrics (package api: its handlers' and the
	// aggregator's).
	edge *api.Metrics
	// caught tells the edge when a new leader has applied every earlier
	// entry (leaderready.go).
	caught *caughtUp

	// durableLSN is the LSN of the newest durable snapshot: retention never
	// deletes above it.
	durableLSN atomicLSN

	closing   chan struct{} // closed by Close: ends the loops
	reads     chan struct{} // closed by EndReads (and Close): ends read streams
	readsOnce sync.Once
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // background goroutines (leader watch, retention, version poll)
	// polledVersion is versionLoop's last complete minimum (version.go).
	polledVersion atomic.Uint32
	// versionKick (buffered 1) makes versionLoop poll now (on election).
	versionKick chan struct{}
}

// NewNode opens (or creates) the node's storage in cfg.Dir, recovers the
// FSM from its newest snapshot plus the segment log, starts Raft, the
// aggregator and the node's loops. It does not serve the API.
func NewNode(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), caught: newCaughtUp(), closing: make(chan struct{}), reads: make(chan struct{}), versionKick: make(chan struct{}, 1)}
	ok := false
	defer func() {
		if ok {
			return
		}
		if n.raft != nil {
			_ = n.raft.Shutdown().Error()
		}
		if n.agg != nil {
			n.agg.Close()
		}
		if n.transport != nil {
			_ = n.transport.Close()
		}
		n.closeStores()
	}()
	var err error
	if n.metrics, err = newMetrics(cfg.Registry, cfg.ID); err != nil {
		return nil, fmt.Errorf("logstore: metrics: %w", err)
	}
	// The node's directories, each durable in its parent before anything
	// is written in it (segment.Open and raft-wal's opening make theirs
	// the same way): a power loss must not drop a directory whose files
	// were synced.
	fsys := cfg.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	for _, dir := range []string{cfg.Dir, filepath.Join(cfg.Dir, "snapshots")} {
		if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
			return nil, fmt.Errorf("logstore: %w", err)
		}
	}
	if n.seg, err = segment.Open(segment.Options{
		Dir: filepath.Join(cfg.Dir, "segments"), SegmentBytes: cfg.SegmentBytes, Logger: n.log, FS: cfg.FS,
	}); err != nil {
		return nil, fmt.Errorf("logstore: open segment log: %w", err)
	}
	if n.edge, err = api.NewMetrics(cfg.Registry, cfg.ID); err != nil {
		return nil, fmt.Errorf("logstore: metrics: %w", err)
	}
	if err := cfg.Registry.Register(newSegmentCollector(n.seg, cfg.ID)); err != nil {
		return nil, fmt.Errorf("logstore: metrics: %w", err)
	}
	if n.snaps, err = newSnapshotStore(filepath.Join(cfg.Dir, "snapshots"), n.seg.FS(), cfg.SnapshotRetain, n.log, cfg.Now); err != nil {
		return nil, err
	}
	n.snaps.orphanBytes = n.metrics.snapshotOrphanBytes
	n.snaps.tiered = cfg.Tier != nil
	n.snaps.countOrphans()
	st, err := n.recover()
	if err != nil {
		return nil, err
	}
	// Raft's FSM goroutine owns st once Raft starts: log what was recovered
	// from copies taken now.
	recoveredLSN, recoveredIndex := st.LastLSN(), st.LastIndex()
	n.fsm = newFSM(n.seg, st, &n.cfg, n.metrics)
	n.fsm.durable = &n.durableLSN
	n.durableLSN.Store(st.LastLSN())
	n.metrics.firstLSN.Set(float64(n.seg.FirstLSN()))
	if b, err := n.segmentDiskBytes(); err == nil {
		n.metrics.segmentBytes.Set(float64(b))
	}

	hl := raftlog.New(n.log, 0)
	if n.raftStore, err = openRaftStore(cfg.Dir, cfg.RaftLogStore, hl.Named("raft-log"), cfg.FS); err != nil {
		return nil, err
	}
	stream := cfg.RaftStream
	if stream == nil {
		raftLis := cfg.RaftListener
		if raftLis == nil {
			if raftLis, err = net.Listen("tcp", cfg.RaftAddr); err != nil {
				return nil, fmt.Errorf("logstore: raft listen: %w", err)
			}
		}
		stream = tcpStreamLayer{raftLis}
	}
	n.transport = newRaftTransport(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: cfg.RaftTimeout, Logger: hl.Named("raft-net"),
	})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout, rc.ElectionTimeout = cfg.HeartbeatTimeout, cfg.ElectionTimeout
	rc.LeaderLeaseTimeout, rc.CommitTimeout = cfg.LeaderLeaseTimeout, cfg.CommitTimeout
	rc.SnapshotInterval, rc.SnapshotThreshold, rc.TrailingLogs = cfg.SnapshotInterval, cfg.SnapshotThreshold, cfg.TrailingLogs
	rc.MaxAppendEntries = cfg.MaxAppendEntries
	rc.BatchApplyCh = true
	rc.NoSnapshotRestoreOnStart = true
	rc.Logger = hl.Named("raft")
	// Replication (leader) and apply (followers) read back the entries
	// just stored; the cache serves them from memory instead of a log store read
	// and msgpack decode of the whole entry each time.
	logs, err := raft.NewLogCache(raftLogCacheEntries, n.raftStore)
	if err != nil {
		return nil, fmt.Errorf("logstore: raft log cache: %w", err)
	}
	if cfg.Recover {
		if err := n.recoverCluster(rc, logs); err != nil {
			return nil, err
		}
	}
	n.stable = &stableGuard{StableStore: n.raftStore}
	if n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.stable, n.snaps, n.transport); err != nil {
		return nil, fmt.Errorf("logstore: start raft: %w", err)
	}
	if len(cfg.Bootstrap) > 0 {
		has, err := raft.HasExistingState(n.raftStore, n.raftStore, n.snaps)
		if err != nil {
			return nil, fmt.Errorf("logstore: %w", err)
		}
		if !has {
			var servers []raft.Server
			for _, p := range cfg.Bootstrap {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
			}
			if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				return nil, fmt.Errorf("logstore: bootstrap: %w", err)
			}
		}
	}
	aggCfg := n.cfg.aggregatorConfig()
	aggCfg.Sent = n.fsm.sent
	n.agg = api.NewAggregator(n.raft, aggCfg, n.edge)

	if err := n.startTier(); err != nil {
		return nil, err
	}
	n.wg.Add(3)
	go func() { defer n.wg.Done(); n.versionLoop() }()
	go func() { defer n.wg.Done(); n.watchLeadership() }()
	go func() { defer n.wg.Done(); n.retentionLoop() }()
	ok = true
	n.log.Info("logstore node started", "raft", n.transport.LocalAddr(), "api", n.cfg.APIAddr,
		"recovered_lsn", recoveredLSN, "recovered_raft_index", recoveredIndex)
	return n, nil
}

// recover loads the newest snapshot's state and cuts the segment log back
// to it (Raft then re-applies the entries after the snapshot), or starts
// empty when there is no snapshot.
func (n *Node) recover() (*fsm.State, error) {
	ls, err := n.snaps.loadNewest()
	if err != nil {
		return nil, err
	}
	st, idx := fsm.NewState(), uint64(0)
	if ls != nil {
		st, idx = ls.state, ls.meta.Index
	}
	dropped, err := n.seg.TruncateAfterRaftIndex(idx)
	if err != nil {
		return nil, fmt.Errorf("logstore: truncate segment log after raft index %d: %w", idx, err)
	}
	if ls != nil && n.seg.LastLSN() < st.LastLSN() {
		n.log.Warn("segment log behind its snapshot: reinstalling", "lsn", n.seg.LastLSN(), "snapshot_lsn", st.LastLSN())
		if err := ls.reinstall(n.seg, n.cfg.Dir); err != nil {
			return nil, err
		}
	}
	if n.seg.LastLSN() != st.LastLSN() {
		return nil, fmt.Errorf("logstore: segment log ends at lsn %d, snapshot state at %d (raft index %d)", n.seg.LastLSN(), st.LastLSN(), idx)
	}
	n.log.Info("recovered", "lsn", st.LastLSN(), "raft_index", idx, "dropped_records", dropped)
	return st, nil
}

// tcpStreamLayer is raft's stream layer over a given listener (plain TCP),
// so tests and dev mode can bind 127.0.0.1:0 and learn the port before the
// peers start. Config.RaftStream replaces it (TLS).
type tcpStreamLayer struct{ net.Listener }

func (t tcpStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// watchLeadership keeps the leader gauge and health status current, and
// when this node becomes leader registers the API addresses of itself (with
// its HTTP address) and the bootstrap peers (so NOT_LEADER errors can name
// the leader's addresses).
func (n *Node) watchLeadership() {
	ch := n.raft.LeaderCh()
	for {
		select {
		case <-n.closing:
			return
		case isLeader := <-ch:
			if isLeader {
				n.metrics.isLeader.Set(1)
				ready := n.caught.elected()
				n.wg.Add(1)
				go func() { defer n.wg.Done(); n.catchUp(ready) }()
				n.registerMembers()
				select {
				case n.versionKick <- struct{}{}:
				default:
				}
			} else {
				n.metrics.isLeader.Set(0)
				n.caught.deposed()
			}
		}
	}
}

// catchUp marks the new leadership caught up (caughtUp) once a Raft
// barrier returns: every entry before it is applied. A barrier that fails
// while this node still leads is tried again (each try is bounded by
// RaftTimeout).
func (n *Node) catchUp(ready func()) {
	for n.raft.State() == raft.Leader {
		// Waited for beside n.closing: hashicorp/raft may never resolve a
		// barrier left in its apply channel at shutdown (as
		// aggregator.await), and Close waits for this goroutine. The
		// waiter of such a barrier stays blocked (once per election).
		f, done := n.raft.Barrier(n.cfg.RaftTimeout), make(chan error, 1)
		go func() { done <- f.Error() }()
		select {
		case err := <-done:
			if err == nil {
				ready()
				return
			}
		case <-n.closing:
			return
		}
		select {
		case <-n.closing:
			return
		case <-time.After(catchUpRetry):
		}
	}
}

// catchUpRetry paces catchUp's barriers when one fails at once (a
// leadership transfer in progress).
const catchUpRetry = 50 * time.Millisecond

func (n *Node) registerMembers() {
	want := []*logstorepb.MemberCommand{{Id: n.cfg.ID, RaftAddress: string(n.transport.LocalAddr()), ApiAddress: n.APIAddr(), HttpAddress: n.cfg.HTTPAddr}}
	for _, p := range n.cfg.Bootstrap {
		if p.ID != n.cfg.ID && p.APIAddr != "" {
			want = append(want, &logstorepb.MemberCommand{Id: p.ID, RaftAddress: p.RaftAddr, ApiAddress: p.APIAddr})
		}
	}
	for i, m := range want {
		var known *logstorepb.MemberCommand
		n.fsm.withState(func(st *fsm.State) { known = st.Member(m.Id) })
		// A peer's HTTP address is not in the bootstrap list: each node
		// registers its own (i == 0) when it leads.
		if known != nil && known.ApiAddress == m.ApiAddress && known.RaftAddress == m.RaftAddress && (i > 0 || known.HttpAddress == m.HttpAddress) {
			continue
		}
		if err := n.commitMember(context.Background(), m); err != nil {
			n.log.Warn("registering member", "member", m.Id, "err", err)
		}
	}
}

func (n *Node) commitMember(ctx context.Context, m *logstorepb.MemberCommand) error {
	return api.CommitMember(ctx, n.agg, n.cfg.RaftTimeout, m)
}

// ID returns the node's Raft server id.
func (n *Node) ID() string { return n.cfg.ID }

// APIAddr returns the address the node's API is served on (Config.APIAddr).
func (n *Node) APIAddr() string { return n.cfg.APIAddr }

// RegisterServices registers the node's gRPC services (LogStore, Cluster,
// PlayerGroup) on s. Serve s with ServerOptions; stop it before Close
// (after EndReads, so its read streams end at once).
func (n *Node) RegisterServices(s grpc.ServiceRegistrar) {
	api.Register(s, edgeNode{n}, n.agg, n.cfg.edgeConfig(), n.edge)
}

// ServerOptions are the gRPC server options the node's services need: a
// receive limit of one full AppendBatch plus slack (edge.go), so an
// oversize Append gets the typed error instead of gRPC's, and the edge's
// codec and interceptors (internal/grpcedge), so malformed bytes get
// INVALID_ARGUMENT; and fixed flow-control windows (internal/grpcwindow),
// so a producer's lone Append pays no bandwidth-probe PING round trip;
// and a pool of stream workers (streamWorkers).
func (n *Node) ServerOptions() []grpc.ServerOption { return ServerOptions(n.cfg.MaxRequestBytes) }

// ServerOptions are Node.ServerOptions for a node whose Config.MaxRequestBytes
// is maxRequestBytes (0: DefaultMaxRequestBytes), without a node: for a
// server that must be configured as a node's is (bench store's no-op floor).
func ServerOptions(maxRequestBytes int) []grpc.ServerOption {
	c := Config{MaxRequestBytes: cmp.Or(maxRequestBytes, DefaultMaxRequestBytes)}
	return append(append(grpcedge.ServerOptions(), grpcwindow.ServerOptions()...),
		grpc.MaxRecvMsgSize(c.maxRecvBytes()), grpc.NumStreamWorkers(streamWorkers))
}

// streamWorkers is how many goroutines the node's gRPC server keeps to run
// calls on. Without them gRPC starts a goroutine per call, whose small
// stack grows (runtime.newstack copying it) on every Append: an Append
// handler's stack (interceptors, admission, the aggregator's wait) is
// deeper than a new goroutine's, which cost about 14% of the servers' CPU
// with one connection per client (bench store, 64 clients,
// docs/BENCHMARKS.md). A worker keeps its grown stack from call to call. When
// every worker is busy (more calls in flight, or long Read streams), gRPC
// starts a goroutine for the call as before.
const streamWorkers = 128

// Registry is the registry holding the node's metrics (Config.Registry).
func (n *Node) Registry() *prometheus.Registry { return n.cfg.Registry }

// EndReads ends every open Read and ReadTopic stream with SHUTTING_DOWN and
// makes new ones end at once: call it before stopping the API server
// gracefully (Close calls it too). Safe to call more than once.
func (n *Node) EndReads() { n.readsOnce.Do(func() { close(n.reads) }) }

// RaftAddr returns the Raft transport's address.
func (n *Node) RaftAddr() string { return string(n.transport.LocalAddr()) }

// IsLeader reports whether this node is the Raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// HeadLSN returns the highest visible LSN.
func (n *Node) HeadLSN() types.LSN { return n.fsm.head.Load() }

// SegmentLog exposes the node's segment log (for tests and tools: Sync,
// Segments, reading without gRPC). Do not write to it.
func (n *Node) SegmentLog() *segment.Log { return n.seg }

// Raft exposes the node's Raft instance (for tests and tools).
func (n *Node) Raft() *raft.Raft { return n.raft }

// Close shuts Raft down and closes storage; read streams end with
// SHUTTING_DOWN. Stop the API server first: a call served after Close
// finds Raft shut down. Safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.EndReads()
		close(n.closing)
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
		n.agg.Close()
		n.wg.Wait()
		if err := n.transport.Close(); err != nil {
			errs = append(errs, err)
		}
		if n.stable != nil {
			n.stable.seal() // a heartbeat may still be in the transport's hands
		}
		errs = append(errs, n.closeStores())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

func (n *Node) closeStores() error {
	var errs []error
	if n.raftStore != nil {
		errs = append(errs, n.raftStore.Close())
	}
	if n.seg != nil {
		errs = append(errs, n.seg.Close())
	}
	return errors.Join(errs...)
}
