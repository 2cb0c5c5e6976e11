// Package logstore is a LogStore node: one Raft-replicated log for the whole
// cluster (docs/DESIGN.md, "LogStore"). A transaction (one Append of 1..N topic slices) is
// one record of the log, so it commits atomically; apply assigns it the next
// dense LSN and dense per-topic offsets on every replica.
//
// # Write path
//
//	gRPC Append, or each request of an AppendBatch (package api, the edge:
//	  handlers, aggregator and error mapping; the node behind api.Node, edge.go)
//	  ─ admit (package api: a retry answered from the state, then validate,
//	    then schemas; on a leader caught up with its term, leaderready.go)
//	  ─▶ aggregator intake (bounded)
//	  ─▶ one Raft entry of many commands ─▶ Raft log store (raftstore.go: raft-wal or raft-boltdb; fsync) + replication
//	  ─▶ raftFSM.Apply on every node: fsm.Machine.Apply (package fsm) appends
//	     one CRC-framed record per txn to the segment log (AppendBatch: one
//	     write call per entry; no fsync)
//	  ─▶ the visible head advances once per entry; readers wake
//
// Decisions (the design's choices, fixed here):
//   - Aggregation (api/aggregator.go): one goroutine drains the intake queue
//     (Config.IntakeQueue, default 8192) into one logstorepb.Entry bounded by
//     MaxBatchTxns (1024) and MaxBatchBytes (1 MiB, soft), with at most
//     MaxInflightEntries (4) entries in flight. No idle linger: when
//     nothing is in flight and nothing resolved lately a lone request goes
//     out at once; while entries are in flight the batch grows and goes out
//     when one resolves, or earlier once it holds PipelineMinTxns (64)
//     commands (group commit: fewer, larger entries, fewer fsyncs per
//     transaction). Right after an entry resolves, a batch also waits for
//     the requests that entry answered (their clients come back), as long
//     as they lately came back within about a commit, at most 10ms (the
//     convoy hold: it keeps concurrent clients in one entry instead of two
//     alternating ones; a serial client completes its own batch and never
//     waits). A
//     full intake answers RESOURCE_EXHAUSTED/QUEUE_FULL at once. The entry
//     carries the leader's timestamp, non-decreasing (apply clamps it to
//     the previous one too), and the leader's ApplyLimits (below).
//   - Apply is deterministic: it reads only the entry (commands, timestamp,
//     limits) and the replicated state, never a clock, the node's Config,
//     map order or randomness. It lives in package fsm (logstore/fsm),
//     whose imports a test keeps free of time, os, randomness, this
//     package and Raft. Per Append: idempotent-producer check (a producer
//     registered with InitProducer: id, epoch and a window of its last 5
//     results, unknown ids refused, older epochs fenced, a remembered
//     sequence resent with other content SEQUENCE_REUSED (a digest of each
//     remembered request: fsm/digest.go): fsm/producer.go;
//     or a legacy unregistered producer id +
//     sequence: the next one writes, the last one again returns the stored
//     first result with duplicate=true (other content: SEQUENCE_REUSED,
//     from cluster version 3), anything else is SEQUENCE_MISMATCH
//     with the expected sequence; a new producer starts at 1), conditions
//     (expected next offset per topic, or a group's expected committed
//     offset of a topic, checked before the txn's own offset commits; a
//     mismatch fails that txn alone with CONDITION_FAILED), then LSN and offsets, offset commits, one segment
//     record. A failed condition consumes the producer's sequence (its retry
//     gets the same failure). The producer table holds at most MaxProducers
//     (10000; the least recently seen is evicted) and drops producers idle
//     for ProducerIdleExpiry (24h) of log time. NextEpoch and ReportConsumer
//     are commands too; so is a member registration (id, Raft and API
//     address) that lets every node name the leader's API address in
//     NOT_LEADER errors.
//   - Limits that change what apply does travel in the entry: the leader
//     stamps logstorepb.ApplyLimits (its Config's MaxProducers and
//     ProducerIdleExpiry, and the MaxConsumers / MaxGroupOffsets constants)
//     into every entry, and every replica applies the entry with them, so
//     nodes configured differently cannot diverge (the leader's values rule
//     and change with leadership; a smaller MaxProducers evicts down to it
//     at the next new producer). An entry without limits (written before
//     they were stamped), or a zero field, applies with the legacy values
//     (10000, 24h, no consumer or group-offset cap), as it did then. The
//     tables without eviction are capped: a new delivery consumer beyond
//     MaxConsumers (4096), or an Append whose offset commits would add
//     (group, topic) rows beyond MaxGroupOffsets (100000), is refused with
//     RESOURCE_EXHAUSTED / TABLE_FULL (limit = the cap) and changes nothing
//     (not even the producer's sequence); updates and removals of existing
//     rows always apply. Rows leave by ReportConsumer with remove and by
//     DeleteGroup (a command removing all of a group's offsets).
//   - The apply path never fsyncs: the Raft log store is the write-ahead log.
//   - Snapshots (snapshot.go) are directories: segment.Checkpoint hard-links
//     sealed segments and copies the active prefix (fsynced), plus the FSM
//     state. Raft's InstallSnapshot streams state, manifest and every
//     retained segment lazily; Restore installs them. On restart Raft does
//     not restore (NoSnapshotRestoreOnStart): recover loads the newest
//     snapshot's state, cuts the segment log after the snapshot's Raft index
//     (TruncateAfterRaftIndex; this also drops a torn tail) and Raft
//     re-applies the entries after it, so restart cost is proportional to
//     entries since the snapshot. Raft's own log stays short
//     (SnapshotThreshold 4096, TrailingLogs 1024).
//   - Retention (retention.go) by size (RetentionBytes 1 GiB) and age
//     (RetentionAge 7 days), local to each node, never above the newest
//     durable snapshot, and never above the lowest delivery-consumer acked
//     LSN unless RetentionCapBytes (8 GiB) or RetentionCapAge (30 days)
//     forces it (warning + logstore_retention_forced_deletes_total).
//     With tiered storage (Config.Tier, tiering.go), never a segment the
//     tier does not hold yet, caps or not.
//   - Edge validation (package api, validate.go): topics are 1..249 characters of
//     [a-zA-Z0-9._-]; a message (value+key+headers) is at most
//     MaxMessageBytes (1 MiB), a request at most MaxRequestBytes (4 MiB),
//     an AppendBatch call at most 4 x MaxRequestBytes in all (edge.go;
//     gRPC's MaxRecvMsgSize is 64 KiB above that, so the typed
//     REQUEST_TOO_LARGE wins for any single request up to 16 MiB).
//
// # Read path
//
// Read and ReadTopic stream from the node's own segment log up to the
// visible head (an atomic), waiting on a channel that is closed and
// replaced at every head advance. They never take a lock the apply path
// holds across I/O. Below the oldest retained LSN: OUT_OF_RANGE /
// BELOW_RETENTION with oldest_lsn; a ReadTopic below the topic's oldest
// retained offset (also when retention removed all of the topic) gets
// BELOW_RETENTION with oldest_offset too, the offset Status reports as the
// topic's first_offset on this node (retention is local). With tiered
// storage, "oldest" is the segment log's OldestReadable: the segment log
// reads below its first LSN from the tier (segment.Below, logstore/tier).
//
// # Goroutines
//
//   - The edge's (package api, listed in its doc): Aggregator.run and
//     Aggregator.complete, started by NewNode and stopped by Close after
//     Raft; the gRPC handlers run on the API server's goroutines.
//   - Raft's own goroutines, among them the FSM goroutine that calls
//     raftFSM.Apply / Snapshot / Restore (owns the fsm.Machine and the segment writer)
//     and the snapshot goroutine that calls fsmSnapshot.Persist.
//   - Node.watchLeadership: fed by raft.LeaderCh; registers member addresses
//     when this node becomes leader.
//   - Node.retentionLoop: a ticker; deletes old segments.
//   - With Config.Tier: tier.Tier.Run, the uploader (logstore/tier's
//     package doc), and one goroutine that cancels it on Close.
//
// The node is a library: it listens only for Raft (Config.RaftAddr, or an
// injected RaftListener or RaftStream). The binary serves its API
// (RegisterServices with ServerOptions, plus health and reflection) and
// its metrics (Registry); internal/serve does both, for cmd/logplayer,
// the dev cluster and the test helpers. Stop that server first
// (EndReads ends the read streams), then Close the node.
//
// # Invariants
//
//   - LSNs are dense (1, 2, 3, …) and per-topic offsets dense (0, 1, …);
//     both are assigned only by apply.
//   - A transaction's slices become visible together: head moves only after
//     a whole entry is applied.
//   - Every replica's segment log holds the same bytes for the same LSNs.
//   - The segment log never holds a record above the last snapshot that a
//     restart would not re-apply: recover cuts to the snapshot's Raft index.
package logstore
