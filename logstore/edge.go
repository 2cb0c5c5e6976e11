package logstore

import (
	"context"
	"io"

	"github.com/logplayer/logplayer/logstore/api"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Limits of the edge, defined in package api (the edge) and kept here
// under their old names for the package's users.
const (
	// AppendBatchRequestFactor is how many MaxRequestBytes one AppendBatch
	// call may carry in all (each request stays within MaxRequestBytes).
	AppendBatchRequestFactor = api.AppendBatchRequestFactor
	// MaxAppendBatchRequests bounds the requests of one AppendBatch call.
	MaxAppendBatchRequests = api.MaxAppendBatchRequests
	// MaxTopicLen is the longest topic name (Kafka's limit).
	MaxTopicLen = api.MaxTopicLen
	// MaxNameLen bounds producer ids, group and consumer names.
	MaxNameLen = api.MaxNameLen
)

// ValidTopic reports whether t is a topic name (api.ValidTopic).
func ValidTopic(t string) bool { return api.ValidTopic(t) }

// edgeLimits are the limits the edge checks a new Append against.
func (c *Config) edgeLimits() api.Limits {
	return api.Limits{MaxMessageBytes: c.MaxMessageBytes, MaxRequestBytes: c.MaxRequestBytes, AllowLegacyProducers: c.AllowLegacyProducers}
}

// maxBatchCallBytes bounds one encoded AppendBatchRequest.
func (c *Config) maxBatchCallBytes() int { return AppendBatchRequestFactor * c.MaxRequestBytes }

// maxRecvBytes is the gRPC server's receive limit: the largest call a
// client may send (an AppendBatch) plus slack, so every request up to it,
// a 5 MiB Append included, is answered by our own validation
// (REQUEST_TOO_LARGE with the limit) instead of gRPC's untyped
// RESOURCE_EXHAUSTED. Only a call above this still gets gRPC's error.
func (c *Config) maxRecvBytes() int { return c.maxBatchCallBytes() + grpcRecvSlack }

// aggregatorConfig is the aggregator's part of c.
func (c *Config) aggregatorConfig() api.AggregatorConfig {
	return api.AggregatorConfig{
		Now: c.Now, IntakeQueue: c.IntakeQueue, IntakeQueueBytes: c.IntakeQueueBytes,
		MaxBatchTxns: c.MaxBatchTxns, MaxBatchBytes: c.MaxBatchBytes, PipelineMinTxns: c.PipelineMinTxns, MaxInflightEntries: c.MaxInflightEntries,
		HoldReturnRatio: c.HoldReturnRatio, RaftTimeout: c.RaftTimeout, Limits: c.applyLimits(),
	}
}

// edgeConfig is the edge's part of c.
func (c *Config) edgeConfig() api.Config {
	return api.Config{
		ID: c.ID, Limits: c.edgeLimits(), MaxBatchCallBytes: c.maxBatchCallBytes(),
		ReadBatchTxns: c.ReadBatchTxns, ReadBatchBytes: c.ReadBatchBytes,
		RaftTimeout: c.RaftTimeout, GroupLease: c.GroupLease, Registry: c.Registry, Logger: c.Logger.With("node", c.ID),
	}
}

// edgeNode is the Node as the edge (package api) sees it: api.Node, read
// views only; writes go through the aggregator the edge is given.
type edgeNode struct{ n *Node }

var _ api.Node = edgeNode{}

func (e edgeNode) Raft() api.Raft                     { return e.n.raft }
func (e edgeNode) View(fn func(st *fsm.State))        { e.n.fsm.withState(fn) }
func (e edgeNode) Head() types.LSN                    { return e.n.fsm.head.Load() }
func (e edgeNode) HeadChanged() <-chan struct{}       { return e.n.fsm.waitChan() }
func (e edgeNode) Log() api.Log                       { return e.n.seg }
func (e edgeNode) CaughtUp(ctx context.Context) error { return e.n.caught.wait(ctx, e.n.IsLeader) }
func (e edgeNode) SupportedVersion() uint32           { return e.n.advertisedVersion() }
func (e edgeNode) ReadsEnded() <-chan struct{}        { return e.n.reads }
func (e edgeNode) OpenBackup() (*logstorepb.BackupInfo, io.ReadCloser, error) {
	return e.n.openBackup()
}
func (e edgeNode) StatusTier(resp *logstorepb.StatusResponse) { e.n.statusTier(resp) }
