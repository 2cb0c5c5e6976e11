package logstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/api"
	"github.com/logplayer/logplayer/logstore/tier"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Documented defaults. Config.validate fills a zero field with its default.
const (
	// DefaultIntakeQueue bounds requests waiting for the aggregator: enough
	// to keep 4 entries of 1024 txns queued behind the in-flight ones, small
	// enough (8192 × ≤4 MiB worst case, a few MiB typical) to bound memory.
	DefaultIntakeQueue = 8192
	// DefaultIntakeQueueBytes bounds the encoded bytes of the requests
	// waiting for the aggregator (intakebytes.go): 64 full-size requests.
	DefaultIntakeQueueBytes = 256 << 20
	// DefaultMaxBatchTxns bounds the commands in one Raft entry.
	DefaultMaxBatchTxns = 1024
	// DefaultMaxBatchBytes bounds an entry's encoded request bytes (soft: one
	// request larger than this still goes out, alone).
	DefaultMaxBatchBytes = 1 << 20
	// DefaultMaxInflightEntries is how many entries the aggregator pipelines
	// into Raft before it waits for the oldest to apply.
	DefaultMaxInflightEntries = 4
	// DefaultPipelineMinTxns: with an entry in flight, a further entry goes
	// out early only once its batch has this many commands (or a quarter of
	// MaxBatchBytes); smaller batches wait for an entry to resolve (group
	// commit: fewer, larger entries, fewer fsyncs per transaction).
	DefaultPipelineMinTxns = 64
	// DefaultHoldReturnRatio bounds the aggregator's convoy hold: a batch
	// waits for the clients an entry answered only while they come back
	// faster than an entry commits (api.DefaultHoldReturnRatio, see
	// api.Aggregator for why not more).
	DefaultHoldReturnRatio = api.DefaultHoldReturnRatio

	// DefaultMaxMessageBytes bounds one message's value+key+headers.
	DefaultMaxMessageBytes = 1 << 20
	// DefaultMaxRequestBytes bounds one encoded AppendRequest; the gRPC
	// server's MaxRecvMsgSize is set grpcRecvSlack above one AppendBatch
	// (AppendBatchRequestFactor requests, edge.go) so an oversize request
	// gets a typed REQUEST_TOO_LARGE instead of a transport error.
	DefaultMaxRequestBytes = 4 << 20
	grpcRecvSlack          = 64 << 10

	// DefaultReadBatchTxns and DefaultReadBatchBytes bound one ReadResponse
	// (a single larger transaction is still sent, alone).
	DefaultReadBatchTxns  = 256
	DefaultReadBatchBytes = 1 << 20

	// DefaultMaxProducers bounds the idempotent-producer table; beyond it
	// the least recently seen producer is evicted (by log time).
	DefaultMaxProducers = 10000
	// DefaultProducerIdleExpiry drops a producer not seen for this long in
	// log time (leader timestamps), checked once per producerSweepEvery.
	DefaultProducerIdleExpiry = 24 * time.Hour
	// DefaultMaxTopics bounds the topic table (topics with messages); a
	// transaction adding a topic beyond it is refused with TABLE_FULL.
	// Status and snapshots hold every topic, so the table must stay small
	// enough to copy in milliseconds.
	DefaultMaxTopics = 10000
	// DefaultMaxTopicDeclarations bounds CreateTopic's declarations.
	DefaultMaxTopicDeclarations = 1000

	// DefaultSegmentBytes is the size at which the segment log seals a file.
	DefaultSegmentBytes = 64 << 20

	// Retention: keep at most RetentionBytes and RetentionAge of data, but
	// never delete what a registered delivery consumer has not acked unless
	// the caps (RetentionCapBytes, RetentionCapAge) force it.
	DefaultRetentionBytes    = 1 << 30
	DefaultRetentionAge      = 7 * 24 * time.Hour
	DefaultRetentionCapBytes = 8 << 30
	DefaultRetentionCapAge   = 30 * 24 * time.Hour
	DefaultRetentionInterval = 30 * time.Second

	// Raft defaults: hashicorp/raft's own timeouts (fine on loopback, and
	// tolerant of a loaded 2-core machine), a short Raft log (the segment
	// log keeps the data), frequent cheap snapshots (sealed segments are
	// hard-linked, not copied).
	DefaultHeartbeatTimeout   = 1000 * time.Millisecond
	DefaultElectionTimeout    = 1000 * time.Millisecond
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	DefaultCommitTimeout      = 5 * time.Millisecond
	DefaultSnapshotInterval   = 30 * time.Second
	DefaultSnapshotThreshold  = 4096
	DefaultTrailingLogs       = 1024
	DefaultSnapshotRetain     = 2
	DefaultMaxAppendEntries   = 16
	DefaultRaftTimeout        = 10 * time.Second
)

// Caps of the replicated tables that have no eviction (dropping a row would
// lose a consumer's retention floor or a group's committed position): past
// them apply refuses a new row with RESOURCE_EXHAUSTED / TABLE_FULL (limit =
// the cap) and changes nothing; existing rows are always updated and
// removed. The leader stamps them into every entry (logstorepb.ApplyLimits),
// so a replica of another version applies an entry with the same caps.
const (
	// MaxConsumers bounds the registered delivery consumers
	// (ReportConsumer; one per LogPlayer target).
	MaxConsumers = 4096
	// MaxGroupOffsets bounds the committed (group, topic) offsets; an
	// Append whose offset commits would add rows beyond it is refused.
	MaxGroupOffsets = 100000
)

// Peer names one voter of the initial cluster.
type Peer struct {
	ID       string
	RaftAddr string
	APIAddr  string
}

// Config configures a Node. Zero fields get the documented defaults.
//
// The producer settings (MaxProducers, ProducerIdleExpiry) bound the
// replicated producer table: the leader stamps its values into every Raft
// entry it writes and every replica applies that entry with them, so nodes
// may differ (the leader's values rule, and change with leadership).
type Config struct {
	// ID is this node's Raft server id (required).
	ID string
	// Dir holds the Raft log store (raft-wal/ or raft.db), snapshots/ and
	// segments/ (required).
	Dir string

	// RaftAddr is the Raft TCP address to bind and advertise, unless
	// RaftStream or RaftListener is set (then its address is advertised).
	RaftAddr     string
	RaftListener net.Listener
	// RaftStream, when set, is the Raft transport's stream layer (it
	// listens and dials; a TLS layer goes here); RaftListener and RaftAddr
	// are then unused.
	RaftStream raft.StreamLayer
	// APIAddr is the address the node's gRPC API is served on (required):
	// the node does not listen on it (the binary serves RegisterServices,
	// see internal/serve), but advertises it to the cluster so NOT_LEADER
	// errors name the leader's API address.
	APIAddr string
	// HTTPAddr is the address the node's API is served on as JSON over
	// HTTP (internal/serve's StoreHTTP; empty: none). Like APIAddr it is
	// only advertised: a leader registers it, so NOT_LEADER errors and
	// Status name the leader's HTTP address for HTTP clients.
	HTTPAddr string

	// Bootstrap lists the initial voters (including this node). A node with
	// existing Raft state ignores it; an empty list means "join later via
	// Cluster.AddVoter on the leader".
	Bootstrap []Peer
	// Recover (store --recover) turns a survivor of a lost quorum into a
	// single-voter cluster before Raft starts (see recoverCluster).
	Recover bool

	Logger   *slog.Logger
	Registry *prometheus.Registry
	// Now is the clock for leader timestamps and retention age.
	Now func() time.Time

	IntakeQueue        int
	IntakeQueueBytes   int64
	MaxBatchTxns       int
	MaxBatchBytes      int
	MaxInflightEntries int
	PipelineMinTxns    int
	// HoldReturnRatio is api.AggregatorConfig.HoldReturnRatio (0: the
	// default); above 1, many one-transaction clients on connections of
	// their own share larger entries, and open-loop writers wait longer.
	HoldReturnRatio float64

	MaxMessageBytes    int
	MaxRequestBytes    int
	ReadBatchTxns      int
	ReadBatchBytes     int
	MaxProducers       int
	ProducerIdleExpiry time.Duration
	// GroupLease is a PlayerGroup member's lease in log time (default
	// DefaultGroupLease); the leader stamps it into every entry (group.go).
	GroupLease time.Duration
	// MaxTopics and MaxTopicDeclarations cap the topic table and the topic
	// declarations (stamped by the leader like MaxProducers).
	MaxTopics            int
	MaxTopicDeclarations int
	// AllowLegacyProducers takes Appends of legacy producer ids (a
	// producer_id without producer_epoch: never registered) as before
	// registered producers existed: an id without a row starts at sequence
	// 1, so a retry after its row was evicted can write twice. Off (the
	// default) they are refused with LEGACY_PRODUCER_REFUSED, at the edge
	// and, from cluster version 4, by apply (the leader stamps the setting
	// into each entry's ApplyLimits, so every replica decides the same).
	// `logplayer store --allow-legacy-producers`.
	AllowLegacyProducers bool

	SegmentBytes int64

	RetentionBytes    int64
	RetentionAge      time.Duration
	RetentionCapBytes int64
	RetentionCapAge   time.Duration
	RetentionInterval time.Duration
	// Tier, when set, uploads sealed segments to S3-compatible object
	// storage and serves reads below local retention from it (tiering.go);
	// retention then deletes only uploaded segments. CacheDir defaults to
	// Dir/tier-cache; Node and Logger are filled in.
	Tier *tier.Config

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotInterval   time.Duration
	SnapshotThreshold  uint64
	TrailingLogs       uint64
	SnapshotRetain     int
	MaxAppendEntries   int
	// RaftTimeout bounds Raft transport I/O and membership changes.
	RaftTimeout time.Duration
	// RaftLogStore selects the backend of Raft's log and stable store:
	// RaftLogWAL (default) or RaftLogBoltDB. A data directory keeps the
	// backend it was created with; NewNode refuses the other one
	// (ErrRaftLogStoreMismatch).
	RaftLogStore RaftLogStore
	// AdvertisedVersion is the cluster version this node tells the leader
	// it supports (0: the binary's fsm.CurrentVersion; higher is capped to
	// it). Set lower to run as an older release would for the version gate
	// (rolling-upgrade tests).
	AdvertisedVersion uint32
	// PeerDialOptions are used by the leader to ask the other nodes' APIs
	// which version they support (default: plaintext).
	PeerDialOptions []grpc.DialOption
	// FS is the filesystem of the segment log, the snapshot store and the
	// raft-wal Raft log and stable store (nil: the real one, opened as
	// before). Tests pass a crashable in-memory one (vfs.NewCrashableMem) to
	// cut a node's power (powerloss_test.go): raft-wal then keeps its
	// metadata and stable keys in walMetaStore files instead of bbolt.
	// RaftLogBoltDB needs the real one.
	FS vfs.FS
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("logstore: invalid config")

func defaultInt[T int | int64 | uint64](p *T, d T) {
	if *p == 0 {
		*p = d
	}
}

func defaultDur(p *time.Duration, d time.Duration) {
	if *p == 0 {
		*p = d
	}
}

// validate fills defaults and rejects nonsense.
func (c *Config) validate() error {
	if c.ID == "" {
		return fmt.Errorf("%w: ID is required", ErrConfig)
	}
	if c.Dir == "" {
		return fmt.Errorf("%w: Dir is required", ErrConfig)
	}
	if c.RaftAddr == "" && c.RaftListener == nil && c.RaftStream == nil {
		return fmt.Errorf("%w: RaftAddr, RaftListener or RaftStream is required", ErrConfig)
	}
	if c.APIAddr == "" {
		return fmt.Errorf("%w: APIAddr is required", ErrConfig)
	}
	if c.RaftLogStore == "" {
		c.RaftLogStore = DefaultRaftLogStore
	}
	if !c.RaftLogStore.valid() {
		return fmt.Errorf("%w: RaftLogStore %q: want %q or %q", ErrConfig, c.RaftLogStore, RaftLogWAL, RaftLogBoltDB)
	}
	if c.FS != nil && c.FS != vfs.Default && c.RaftLogStore != RaftLogWAL {
		return fmt.Errorf("%w: RaftLogStore %q needs the real filesystem (Config.FS is set)", ErrConfig, c.RaftLogStore)
	}
	seen := map[string]bool{}
	for _, p := range c.Bootstrap {
		if p.ID == "" || p.RaftAddr == "" {
			return fmt.Errorf("%w: bootstrap peer %+v needs ID and RaftAddr", ErrConfig, p)
		}
		if seen[p.ID] {
			return fmt.Errorf("%w: bootstrap peer %q listed twice", ErrConfig, p.ID)
		}
		seen[p.ID] = true
	}
	if len(c.Bootstrap) > 0 && !seen[c.ID] {
		return fmt.Errorf("%w: bootstrap list does not include this node %q", ErrConfig, c.ID)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	defaultInt(&c.IntakeQueue, DefaultIntakeQueue)
	defaultInt(&c.IntakeQueueBytes, DefaultIntakeQueueBytes)
	defaultInt(&c.MaxBatchTxns, DefaultMaxBatchTxns)
	defaultInt(&c.MaxBatchBytes, DefaultMaxBatchBytes)
	defaultInt(&c.MaxInflightEntries, DefaultMaxInflightEntries)
	defaultInt(&c.PipelineMinTxns, DefaultPipelineMinTxns)
	if c.HoldReturnRatio == 0 {
		c.HoldReturnRatio = DefaultHoldReturnRatio
	}
	defaultInt(&c.MaxMessageBytes, DefaultMaxMessageBytes)
	defaultInt(&c.MaxRequestBytes, DefaultMaxRequestBytes)
	defaultInt(&c.ReadBatchTxns, DefaultReadBatchTxns)
	defaultInt(&c.ReadBatchBytes, DefaultReadBatchBytes)
	defaultInt(&c.MaxProducers, DefaultMaxProducers)
	defaultDur(&c.ProducerIdleExpiry, DefaultProducerIdleExpiry)
	defaultDur(&c.GroupLease, DefaultGroupLease)
	defaultInt(&c.MaxTopics, DefaultMaxTopics)
	defaultInt(&c.MaxTopicDeclarations, DefaultMaxTopicDeclarations)
	defaultInt(&c.SegmentBytes, DefaultSegmentBytes)
	defaultInt(&c.RetentionBytes, DefaultRetentionBytes)
	defaultDur(&c.RetentionAge, DefaultRetentionAge)
	defaultInt(&c.RetentionCapBytes, DefaultRetentionCapBytes)
	defaultDur(&c.RetentionCapAge, DefaultRetentionCapAge)
	defaultDur(&c.RetentionInterval, DefaultRetentionInterval)
	defaultDur(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	defaultDur(&c.ElectionTimeout, DefaultElectionTimeout)
	defaultDur(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	defaultDur(&c.CommitTimeout, DefaultCommitTimeout)
	defaultDur(&c.SnapshotInterval, DefaultSnapshotInterval)
	defaultInt(&c.SnapshotThreshold, DefaultSnapshotThreshold)
	defaultInt(&c.TrailingLogs, DefaultTrailingLogs)
	defaultInt(&c.SnapshotRetain, DefaultSnapshotRetain)
	defaultInt(&c.MaxAppendEntries, DefaultMaxAppendEntries)
	defaultDur(&c.RaftTimeout, DefaultRaftTimeout)

	for _, v := range []struct {
		name string
		n    int64
	}{
		{"IntakeQueue", int64(c.IntakeQueue)}, {"IntakeQueueBytes", c.IntakeQueueBytes}, {"MaxBatchTxns", int64(c.MaxBatchTxns)},
		{"MaxBatchBytes", int64(c.MaxBatchBytes)}, {"MaxInflightEntries", int64(c.MaxInflightEntries)}, {"PipelineMinTxns", int64(c.PipelineMinTxns)},
		{"MaxMessageBytes", int64(c.MaxMessageBytes)}, {"MaxRequestBytes", int64(c.MaxRequestBytes)},
		{"ReadBatchTxns", int64(c.ReadBatchTxns)}, {"ReadBatchBytes", int64(c.ReadBatchBytes)},
		{"MaxProducers", int64(c.MaxProducers)}, {"SegmentBytes", c.SegmentBytes},
		{"MaxTopics", int64(c.MaxTopics)}, {"MaxTopicDeclarations", int64(c.MaxTopicDeclarations)},
		{"RetentionBytes", c.RetentionBytes}, {"RetentionCapBytes", c.RetentionCapBytes},
		{"SnapshotRetain", int64(c.SnapshotRetain)}, {"MaxAppendEntries", int64(c.MaxAppendEntries)},
	} {
		if v.n < 0 {
			return fmt.Errorf("%w: %s = %d is negative", ErrConfig, v.name, v.n)
		}
	}
	if !(c.HoldReturnRatio > 0) || math.IsInf(c.HoldReturnRatio, 1) {
		return fmt.Errorf("%w: HoldReturnRatio = %v is not a positive number", ErrConfig, c.HoldReturnRatio)
	}
	if c.IntakeQueueBytes < int64(c.MaxRequestBytes) {
		return fmt.Errorf("%w: IntakeQueueBytes %d below MaxRequestBytes %d", ErrConfig, c.IntakeQueueBytes, c.MaxRequestBytes)
	}
	if c.MaxMessageBytes > c.MaxRequestBytes {
		return fmt.Errorf("%w: MaxMessageBytes %d above MaxRequestBytes %d", ErrConfig, c.MaxMessageBytes, c.MaxRequestBytes)
	}
	if c.RetentionCapBytes < c.RetentionBytes {
		return fmt.Errorf("%w: RetentionCapBytes %d below RetentionBytes %d", ErrConfig, c.RetentionCapBytes, c.RetentionBytes)
	}
	if c.RetentionCapAge < c.RetentionAge {
		return fmt.Errorf("%w: RetentionCapAge %v below RetentionAge %v", ErrConfig, c.RetentionCapAge, c.RetentionAge)
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return fmt.Errorf("%w: LeaderLeaseTimeout %v above HeartbeatTimeout %v", ErrConfig, c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.ProducerIdleExpiry < 0 || c.GroupLease < 0 || c.RetentionAge < 0 || c.RetentionInterval < 0 {
		return fmt.Errorf("%w: negative duration", ErrConfig)
	}
	return nil
}

// applyLimits returns the limits a leader with this config stamps into the
// entries it writes (call after validate).
func (c *Config) applyLimits() *logstorepb.ApplyLimits {
	return &logstorepb.ApplyLimits{
		MaxProducers:            uint64(c.MaxProducers),
		ProducerIdleExpiryNanos: int64(c.ProducerIdleExpiry),
		MaxConsumers:            MaxConsumers,
		MaxGroupOffsets:         MaxGroupOffsets,
		GroupLeaseNanos:         int64(c.GroupLease),
		MaxRegisteredTargets:    MaxRegisteredTargets,
		MaxTopics:               uint64(c.MaxTopics),
		MaxTopicDeclarations:    uint64(c.MaxTopicDeclarations),
		AllowLegacyProducers:    c.AllowLegacyProducers,
	}
}
