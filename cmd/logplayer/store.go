package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"time"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/security"
)

type storeCmd struct {
	id, dataDir       string
	raftLogStore      string
	raftAddr, apiAddr cli.AddrValue
	metricsAddr       cli.OptAddrValue
	httpAddr          cli.OptAddrValue
	peers             cli.PeerList
	recoverQuorum     bool

	intakeQueue, maxBatchTxns         int
	maxTopics, maxTopicDeclarations   int
	allowLegacyProducers              bool
	maxBatchBytes                     cli.SizeValue
	maxMessageBytes, maxRequestBytes  cli.SizeValue
	retentionBytes                    cli.SizeValue
	intakeQueueBytes                  cli.SizeValue
	retentionAge, snapshotInterval    time.Duration
	segmentBytes                      cli.SizeValue // issue #29's e2e trims a small log
	retentionInterval                 time.Duration // issue #29's e2e trims a small log
	heartbeatTimeout, electionTimeout time.Duration

	tls     cli.TLSServerFlags
	raftTLS cli.RaftTLSFlags
	tier    storeTierFlags // storetier.go
}

func (c *storeCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "this node's Raft server `id`")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` for the Raft log, snapshots and segments")
	fs.StringVar(&c.raftLogStore, "raft-log-store", string(logstore.DefaultRaftLogStore),
		"Raft log `backend`: wal (hashicorp/raft-wal, one fsync per batch) or boltdb (raft-boltdb/v2); a data directory keeps the one it was created with")
	fs.Var(&c.raftAddr, "raft-addr", "Raft TCP `address` to bind and advertise")
	fs.Var(&c.apiAddr, "api-addr", "gRPC API `address` to serve")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	fs.Var(&c.httpAddr, "http-addr", "also serve the API as JSON over HTTP (Connect, gRPC-Web, REST /v1/...) on this `address`, with the API's TLS and authorization; advertised, like --api-addr, in NOT_LEADER answers when this node leads (off when empty)")
	fs.BoolVar(&c.recoverQuorum, "recover", false,
		"once, on the one survivor of a quorum lost for good: make this node the only voter (acknowledged writes it lacked are lost); grow it again with cluster add")
	fs.Var(&c.peers, "peer", "initial voter `ID=RAFT_ADDR/API_ADDR` (repeat for each; ignored once the node has Raft state)")
	fs.IntVar(&c.intakeQueue, "intake-queue", logstore.DefaultIntakeQueue, "appends waiting for the aggregator; beyond it Append answers RESOURCE_EXHAUSTED")
	fs.IntVar(&c.maxTopics, "max-topics", logstore.DefaultMaxTopics, "topics with messages at most; an append adding one beyond it is refused (TABLE_FULL)")
	fs.IntVar(&c.maxTopicDeclarations, "max-topic-declarations", logstore.DefaultMaxTopicDeclarations, "topic declarations (topic create) at most")
	fs.BoolVar(&c.allowLegacyProducers, "allow-legacy-producers", false, "take Appends of unregistered producer ids (append --producer-id; no exactly-once after eviction) instead of refusing them with LEGACY_PRODUCER_REFUSED")
	c.intakeQueueBytes.Bytes = logstore.DefaultIntakeQueueBytes
	fs.Var(&c.intakeQueueBytes, "intake-queue-bytes", "request `bytes` waiting for the aggregator at most; beyond it Append answers RESOURCE_EXHAUSTED (QUEUE_FULL)")
	fs.IntVar(&c.maxBatchTxns, "max-batch-txns", logstore.DefaultMaxBatchTxns, "transactions in one Raft entry at most")
	c.maxBatchBytes.Bytes = logstore.DefaultMaxBatchBytes
	fs.Var(&c.maxBatchBytes, "max-batch-bytes", "request `bytes` in one Raft entry at most")
	c.maxMessageBytes.Bytes = logstore.DefaultMaxMessageBytes
	fs.Var(&c.maxMessageBytes, "max-message-bytes", "largest message (value+key+headers) in `bytes`")
	c.maxRequestBytes.Bytes = logstore.DefaultMaxRequestBytes
	fs.Var(&c.maxRequestBytes, "max-request-bytes", "largest Append request in `bytes`")
	c.retentionBytes.Bytes = logstore.DefaultRetentionBytes
	fs.Var(&c.retentionBytes, "retention-bytes", "keep at most this many `bytes` of segments (unacked data of registered consumers is kept longer, up to a cap)")
	fs.DurationVar(&c.retentionAge, "retention-age", logstore.DefaultRetentionAge, "keep segments at most this long")
	c.segmentBytes.Bytes = logstore.DefaultSegmentBytes
	fs.Var(&c.segmentBytes, "segment-bytes", "seal a segment file at this many `bytes` (retention deletes whole sealed segments; with --tier-url they are uploaded first); every node must use the same value")
	fs.DurationVar(&c.retentionInterval, "retention-interval", logstore.DefaultRetentionInterval, "how often retention runs")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", logstore.DefaultSnapshotInterval, "how often Raft checks whether to snapshot")
	fs.DurationVar(&c.heartbeatTimeout, "heartbeat-timeout", logstore.DefaultHeartbeatTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&c.electionTimeout, "election-timeout", logstore.DefaultElectionTimeout, "Raft election timeout")
	c.tls.Register(fs)
	c.raftTLS.Register(fs)
	c.tier.register(fs)
}

func (c *storeCmd) config(s *cli.Sys) logstore.Config {
	cfg := logstore.Config{
		ID:                   c.id,
		Dir:                  c.dataDir,
		RaftLogStore:         logstore.RaftLogStore(c.raftLogStore),
		RaftAddr:             c.raftAddr.Addr,
		APIAddr:              c.apiAddr.Addr,
		HTTPAddr:             c.httpAddr.Addr,
		Logger:               s.Log,
		Registry:             serve.ProcessRegistry(),
		IntakeQueue:          c.intakeQueue,
		IntakeQueueBytes:     c.intakeQueueBytes.Bytes,
		MaxTopics:            c.maxTopics,
		MaxTopicDeclarations: c.maxTopicDeclarations,
		AllowLegacyProducers: c.allowLegacyProducers,
		MaxBatchTxns:         c.maxBatchTxns,
		MaxBatchBytes:        int(c.maxBatchBytes.Bytes),
		MaxMessageBytes:      int(c.maxMessageBytes.Bytes),
		MaxRequestBytes:      int(c.maxRequestBytes.Bytes),
		RetentionBytes:       c.retentionBytes.Bytes,
		RetentionAge:         c.retentionAge,
		SegmentBytes:         c.segmentBytes.Bytes,
		RetentionInterval:    c.retentionInterval,
		SnapshotInterval:     c.snapshotInterval,
		HeartbeatTimeout:     c.heartbeatTimeout,
		ElectionTimeout:      c.electionTimeout,
		Recover:              c.recoverQuorum,
		RetentionCapBytes:    max(c.retentionBytes.Bytes, logstore.DefaultRetentionCapBytes),
		RetentionCapAge:      max(c.retentionAge, logstore.DefaultRetentionCapAge),
		Now:                  storeClock(),
	}
	if cfg.LeaderLeaseTimeout = logstore.DefaultLeaderLeaseTimeout; cfg.LeaderLeaseTimeout > cfg.HeartbeatTimeout {
		cfg.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	}
	c.tier.apply(&cfg)
	cfg.Bootstrap = logstorePeers(c.peers)
	return cfg
}

// logstorePeers are the voters of --peer flags (nil for none).
func logstorePeers(l cli.PeerList) []logstore.Peer {
	var peers []logstore.Peer
	for _, p := range l.Peers {
		peers = append(peers, logstore.Peer{ID: p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr})
	}
	return peers
}

func (c *storeCmd) Run(ctx context.Context, s *cli.Sys) error {
	role := serve.StoreRoleConfig{Node: c.config(s), HTTPAddr: c.httpAddr.Addr, MetricsAddr: c.metricsAddr.Addr, Log: s.Log,
		RaftTLS: security.Files{CAFile: cmp.Or(c.raftTLS.CA, c.tls.CA), CertFile: cmp.Or(c.raftTLS.Cert, c.tls.Cert), KeyFile: cmp.Or(c.raftTLS.Key, c.tls.Key)}}
	opts, metricsTLS, err := c.tls.Setup(s.Log, nil)
	if err != nil {
		return err
	}
	role.Options, role.MetricsTLS = append(opts, allowPlayerPings()), metricsTLS
	if role.RaftPeers = c.raftTLS.Peers.Items; !c.raftTLS.Peers.Given {
		for _, p := range c.peers.Peers {
			role.RaftPeers = append(role.RaftPeers, p.ID)
		}
	}
	if role.RaftTLS.CertFile != "" && len(role.RaftPeers) == 0 {
		return cli.Usagef("%v", cli.ErrRaftPeers)
	}
	if c.tls.Enabled() {
		o := c.tls.ServerTLSOptions()
		role.HTTPTLS, role.PeerTLS = &o, o.Files
	}
	err = serve.RunStore(ctx, role)
	if errors.Is(err, serve.ErrConfig) {
		return cli.Usagef("%v", err)
	}
	return err
}
