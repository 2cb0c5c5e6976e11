package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"time"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/security"
)

func init() {
	register(&command{
		name:     "store",
		summary:  "run a LogStore node (one Raft voter of the replicated log)",
		synopsis: "--id ID --data-dir DIR --raft-addr HOST:PORT --api-addr HOST:PORT [--peer ID=RAFT/API ...] [flags]",
		about: `
Runs one LogStore node: Raft (hashicorp/raft on raft-wal, or raft-boltdb with
--raft-log-store boltdb), the segment log and
the gRPC API (LogStore, Cluster, health, reflection) on --api-addr.

A new cluster starts with every node given the same --peer list (each voter's
id, Raft address and API address, this node included); a node whose
--data-dir already holds Raft state ignores --peer. A node started without
--peer waits to be added with 'logplayer cluster add'.

--recover, when 2 of 3 voters (a quorum) are gone for good, turns this
survivor into a single-voter cluster (hashicorp/raft RecoverCluster) before
it starts; see the README runbook for what can be lost. Use it once.

Stops gracefully on SIGINT or SIGTERM.`,
		examples: []string{
			"# a 3-node cluster on one machine (run each in its own terminal)",
			"logplayer store --id n1 --data-dir data/n1 --raft-addr 127.0.0.1:7410 --api-addr 127.0.0.1:7400 \\",
			"    --peer n1=127.0.0.1:7410/127.0.0.1:7400 --peer n2=127.0.0.1:7411/127.0.0.1:7401 --peer n3=127.0.0.1:7412/127.0.0.1:7402",
			"# the same from a config file, with the peers from the environment",
			"LOGPLAYER_PEER='n1=127.0.0.1:7410/127.0.0.1:7400 n2=127.0.0.1:7411/127.0.0.1:7401 n3=127.0.0.1:7412/127.0.0.1:7402' \\",
			"    logplayer store --config n1.json",
		},
		server:   true,
		required: []string{"id", "data-dir", "raft-addr", "api-addr"},
		new:      func() runner { return &storeCmd{} },
	})
}

type storeCmd struct {
	id, dataDir       string
	raftLogStore      string
	raftAddr, apiAddr addrValue
	metricsAddr       optAddrValue
	httpAddr          optAddrValue
	peers             peerList
	recoverQuorum     bool

	intakeQueue, maxBatchTxns         int
	maxTopics, maxTopicDeclarations   int
	allowLegacyProducers              bool
	maxBatchBytes                     sizeValue
	maxMessageBytes, maxRequestBytes  sizeValue
	retentionBytes                    sizeValue
	intakeQueueBytes                  sizeValue
	retentionAge, snapshotInterval    time.Duration
	segmentBytes                      sizeValue     // issue #29's e2e trims a small log
	retentionInterval                 time.Duration // issue #29's e2e trims a small log
	heartbeatTimeout, electionTimeout time.Duration

	tls     tlsServerFlags
	raftTLS raftTLSFlags
	tier    storeTierFlags // storetier.go
}

func (c *storeCmd) flags(fs *flag.FlagSet) {
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
	c.intakeQueueBytes.bytes = logstore.DefaultIntakeQueueBytes
	fs.Var(&c.intakeQueueBytes, "intake-queue-bytes", "request `bytes` waiting for the aggregator at most; beyond it Append answers RESOURCE_EXHAUSTED (QUEUE_FULL)")
	fs.IntVar(&c.maxBatchTxns, "max-batch-txns", logstore.DefaultMaxBatchTxns, "transactions in one Raft entry at most")
	c.maxBatchBytes.bytes = logstore.DefaultMaxBatchBytes
	fs.Var(&c.maxBatchBytes, "max-batch-bytes", "request `bytes` in one Raft entry at most")
	c.maxMessageBytes.bytes = logstore.DefaultMaxMessageBytes
	fs.Var(&c.maxMessageBytes, "max-message-bytes", "largest message (value+key+headers) in `bytes`")
	c.maxRequestBytes.bytes = logstore.DefaultMaxRequestBytes
	fs.Var(&c.maxRequestBytes, "max-request-bytes", "largest Append request in `bytes`")
	c.retentionBytes.bytes = logstore.DefaultRetentionBytes
	fs.Var(&c.retentionBytes, "retention-bytes", "keep at most this many `bytes` of segments (unacked data of registered consumers is kept longer, up to a cap)")
	fs.DurationVar(&c.retentionAge, "retention-age", logstore.DefaultRetentionAge, "keep segments at most this long")
	c.segmentBytes.bytes = logstore.DefaultSegmentBytes
	fs.Var(&c.segmentBytes, "segment-bytes", "seal a segment file at this many `bytes` (retention deletes whole sealed segments; with --tier-url they are uploaded first); every node must use the same value")
	fs.DurationVar(&c.retentionInterval, "retention-interval", logstore.DefaultRetentionInterval, "how often retention runs")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", logstore.DefaultSnapshotInterval, "how often Raft checks whether to snapshot")
	fs.DurationVar(&c.heartbeatTimeout, "heartbeat-timeout", logstore.DefaultHeartbeatTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&c.electionTimeout, "election-timeout", logstore.DefaultElectionTimeout, "Raft election timeout")
	c.tls.register(fs)
	c.raftTLS.register(fs)
	c.tier.register(fs)
}

func (c *storeCmd) config(s *sys) logstore.Config {
	cfg := logstore.Config{
		ID:                   c.id,
		Dir:                  c.dataDir,
		RaftLogStore:         logstore.RaftLogStore(c.raftLogStore),
		RaftAddr:             c.raftAddr.addr,
		APIAddr:              c.apiAddr.addr,
		HTTPAddr:             c.httpAddr.addr,
		Logger:               s.log,
		Registry:             serve.ProcessRegistry(),
		IntakeQueue:          c.intakeQueue,
		IntakeQueueBytes:     c.intakeQueueBytes.bytes,
		MaxTopics:            c.maxTopics,
		MaxTopicDeclarations: c.maxTopicDeclarations,
		AllowLegacyProducers: c.allowLegacyProducers,
		MaxBatchTxns:         c.maxBatchTxns,
		MaxBatchBytes:        int(c.maxBatchBytes.bytes),
		MaxMessageBytes:      int(c.maxMessageBytes.bytes),
		MaxRequestBytes:      int(c.maxRequestBytes.bytes),
		RetentionBytes:       c.retentionBytes.bytes,
		RetentionAge:         c.retentionAge,
		SegmentBytes:         c.segmentBytes.bytes,
		RetentionInterval:    c.retentionInterval,
		SnapshotInterval:     c.snapshotInterval,
		HeartbeatTimeout:     c.heartbeatTimeout,
		ElectionTimeout:      c.electionTimeout,
		Recover:              c.recoverQuorum,
		RetentionCapBytes:    max(c.retentionBytes.bytes, logstore.DefaultRetentionCapBytes),
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
func logstorePeers(l peerList) []logstore.Peer {
	var peers []logstore.Peer
	for _, p := range l.peers {
		peers = append(peers, logstore.Peer{ID: p.id, RaftAddr: p.raftAddr, APIAddr: p.apiAddr})
	}
	return peers
}

func (c *storeCmd) run(ctx context.Context, s *sys) error {
	role := serve.StoreRoleConfig{Node: c.config(s), HTTPAddr: c.httpAddr.addr, MetricsAddr: c.metricsAddr.addr, Log: s.log,
		RaftTLS: security.Files{CAFile: cmp.Or(c.raftTLS.ca, c.tls.ca), CertFile: cmp.Or(c.raftTLS.cert, c.tls.cert), KeyFile: cmp.Or(c.raftTLS.key, c.tls.key)}}
	opts, metricsTLS, err := c.tls.setup(s.log, nil)
	if err != nil {
		return err
	}
	role.Options, role.MetricsTLS = append(opts, allowPlayerPings()), metricsTLS
	if role.RaftPeers = c.raftTLS.peers.items; !c.raftTLS.peers.set {
		for _, p := range c.peers.peers {
			role.RaftPeers = append(role.RaftPeers, p.id)
		}
	}
	if role.RaftTLS.CertFile != "" && len(role.RaftPeers) == 0 {
		return usagef("%v", errRaftPeers)
	}
	if c.tls.enabled() {
		o := c.tls.serverTLSOptions()
		role.HTTPTLS, role.PeerTLS = &o, o.Files
	}
	err = serve.RunStore(ctx, role)
	if errors.Is(err, serve.ErrConfig) {
		return usagef("%v", err)
	}
	return err
}
