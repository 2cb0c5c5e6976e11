package api

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Node is what the edge needs of the node behind it, and all it may
// touch: the node's Raft instance (Raft), read-only views of the applied
// state (View, Head) and of the segment log (Log), and four signals of
// the node's own lifecycle. Writes never go through Node: every command
// enters the log through the Aggregator the edge is given. logstore.Node
// implements it (logstore/edge.go).
type Node interface {
	// Raft is the node's Raft instance: role, leader, terms, configuration
	// and membership changes.
	Raft() Raft
	// View calls fn with the applied state under the state's lock: fn must
	// be quick, must not block, and must not keep st or what it returns
	// by reference past the call unless the state's method copies it.
	View(fn func(st *fsm.State))
	// Head is the highest visible LSN.
	Head() types.LSN
	// HeadChanged returns a channel closed when Head next moves (read it
	// before Head, so no advance is missed).
	HeadChanged() <-chan struct{}
	// Log is the node's segment log, for reads.
	Log() Log
	// CaughtUp returns nil once this node leads and has applied every
	// entry committed before its term, apierr.ErrNotLeader when it does not
	// lead (or stops first), and ctx's error when ctx ends first.
	CaughtUp(ctx context.Context) error
	// SupportedVersion is the cluster version this node's binary supports
	// (what Status advertises to the leader's version poll).
	SupportedVersion() uint32
	// ReadsEnded is closed when open read streams must end (SHUTTING_DOWN).
	ReadsEnded() <-chan struct{}
	// OpenBackup takes (or reuses) a snapshot for a backup: its summary and
	// a reader of the whole archive, which the caller closes.
	OpenBackup() (*logstorepb.BackupInfo, io.ReadCloser, error)
	// StatusTier fills Status's local and tiered LSN ranges and upload lag
	// (logstore/tiering.go); first_lsn becomes the oldest readable LSN.
	StatusTier(resp *logstorepb.StatusResponse)
}

// Raft is the part of *raft.Raft the edge uses.
type Raft interface {
	State() raft.RaftState
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	CurrentTerm() uint64
	CommitIndex() uint64
	AppliedIndex() uint64
	GetConfiguration() raft.ConfigurationFuture
	AddVoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	LeadershipTransfer() raft.Future
	LeadershipTransferToServer(id raft.ServerID, address raft.ServerAddress) raft.Future
}

// Log is the part of *segment.Log the edge reads.
type Log interface {
	FirstLSN() types.LSN
	// OldestReadable is the oldest LSN a read can start from: FirstLSN, or
	// below it when tiered storage holds older segments (logstore/tier).
	OldestReadable() types.LSN
	SizeBytes() int64
	Read(from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) error
	TopicOffsetLSN(topic string, offset types.Offset) (types.LSN, error)
	TopicFirstOffset(topic string) (types.Offset, bool)
}

var (
	_ Raft    = (*raft.Raft)(nil)
	_ Applier = (*raft.Raft)(nil)
	_ Log     = (*segment.Log)(nil)
)

// Config is the edge's part of the node's configuration
// (logstore.Config's fields of the same names).
type Config struct {
	// ID is the node's Raft server id (named in NOT_LEADER and Status).
	ID string
	// Limits are what a new Append is checked against.
	Limits Limits
	// MaxBatchCallBytes bounds one encoded AppendBatchRequest.
	MaxBatchCallBytes int
	// ReadBatchTxns and ReadBatchBytes bound one ReadResponse.
	ReadBatchTxns, ReadBatchBytes int
	// RaftTimeout bounds membership changes and member registration.
	RaftTimeout time.Duration
	// GroupLease is the PlayerGroup lease DescribeGroup reports.
	GroupLease time.Duration
	// Registry takes the PlayerGroup service's collectors.
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// server implements the LogStore, Cluster and PlayerGroup gRPC services
// of a node. Every error it returns goes through apierr. It holds no
// goroutines or locks of its own: handlers run on gRPC's goroutines,
// block on the Aggregator (writes) or on Node.HeadChanged (reads at the
// head), and read the state only through Node.View.
type server struct {
	logstorepb.UnimplementedLogStoreServer
	logstorepb.UnimplementedClusterServer
	node    Node
	raft    Raft
	log     Log
	agg     *Aggregator
	cfg     Config
	metrics *Metrics
}

// Register registers the edge's gRPC services (LogStore, Cluster,
// PlayerGroup) for node on s; agg carries its writes into node's Raft log
// and m holds the edge's collectors (NewMetrics).
func Register(s grpc.ServiceRegistrar, node Node, agg *Aggregator, cfg Config, m *Metrics) {
	srv := &server{node: node, raft: node.Raft(), log: node.Log(), agg: agg, cfg: cfg, metrics: m}
	logstorepb.RegisterLogStoreServer(s, srv)
	logstorepb.RegisterClusterServer(s, srv)
	logstorepb.RegisterPlayerGroupServer(s, newGroupServer(srv))
}

// isLeader reports whether the node leads now.
func (s *server) isLeader() bool { return s.raft.State() == raft.Leader }

// gate refuses cmd with FEATURE_NOT_ENABLED while the committed cluster
// version is below what it needs (fsm.Gate): at the edge, before it
// enters the log.
func (s *server) gate(cmd *logstorepb.Command) error {
	var err error
	s.node.View(func(st *fsm.State) { err = fsm.Gate(st, cmd) })
	return err
}

// CommitMember registers (or with m.Remove unregisters) a member's
// addresses through agg, waiting at most timeout.
func CommitMember(ctx context.Context, agg *Aggregator, timeout time.Duration, m *logstorepb.MemberCommand) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := &logstorepb.Command{Kind: &logstorepb.Command_Member{Member: m}}
	_, err := agg.Submit(ctx, cmd, proto.Size(cmd))
	return err
}
