// Package target is the target SDK: it turns any store into a LogPlayer
// delivery target (docs/DESIGN.md, "Targets").
//
// The application implements Store: State reports the durable applied LSN,
// highest epoch and per-topic next offsets; Apply applies deliveries and
// records the new State in one local atomic durable transaction. NewServer
// wraps a Store in the gRPC Target service (proto/target.proto).
// A Store on a bbolt file keeps its State with package target/boltstate
// (load, save in the data's transaction, format check), as the reference
// shard and the demo's event log do.
//
// # Protocol
//
// One Deliver stream per LogPlayer-to-target connection:
//
//	LogPlayer                         target
//	Hello{player, epoch, target, version, session, log identity}
//	                                  HelloAck{applied_lsn, incarnation_id, version, topics, log identity}
//	Batch{deliveries…}                (queued, group-committed)
//	Batch{deliveries…}
//	                                  Ack{applied_lsn}   cumulative, after the local commit
//
// A Delivery with no slices is a progress marker: it only advances the
// applied LSN. A request must stay below MaxBatchBytes when the server uses
// ServerOptions (gRPC's own default limit is 4 MiB). When the LogPlayer closes its send side, the target applies
// everything it received, acks, and ends the stream with OK.
//
// # Checks and refusals
//
// The Hello must name protocol version 1, this target's id and an epoch >= 1.
// Epoch fencing: an epoch below the highest seen is refused; a higher epoch
// is persisted through Store.Apply (with no deliveries) before the HelloAck,
// and the stream it overtakes is ended, so after a restart an older LogPlayer
// is still refused. The takeover happens in the applier: batches of the old
// stream queued before the new Hello may still be applied (and are then in
// the HelloAck's applied LSN); nothing of the old stream is applied after. Within one epoch a stream with a session
// (types.Session: the LogPlayer's count of streams to this target) below the
// highest seen is refused and a newer stream replaces the older one
// (sessions are kept for the process life only; they restart with each
// LogPlayer epoch). The LogPlayer's dispatcher term never reaches the target.
//
// Log identity: State.LogClusterID and LogIncarnation name the log the
// State was written from (docs/ARCHITECTURE.md "The log's identity"). The
// first Hello carrying an identity is adopted (stored through Store.Apply
// with the epoch, before the HelloAck); a Hello with another identity is
// refused with OTHER_LOG and changes nothing (the LogStore was restored or
// recovered behind this target, or it is another cluster); a Hello without
// one is not checked. Config.AdoptLogIdentity is the operator's reset.
//
// Continuity, checked for every delivery before the Store sees it: its LSN
// must be above the applied LSN (LSNs need not be dense: a target only gets
// the transactions that touch its topics), and each slice must start exactly
// at its topic's next offset. A topic never seen: with Config.Topics set it
// must start at offset 0 (and other topics are refused); without it, the
// first slice fixes the topic's position. A batch that fails a check is
// refused whole (nothing of it is applied); what the stream sent before it is
// applied and acked; the stream then ends with an error so the LogPlayer
// reconnects and resyncs from the HelloAck's real applied LSN.
//
// Every refusal is a gRPC status with a logstorepb.ErrorDetail:
//
//	gRPC code            ErrorCode             LogPlayer should
//	INVALID_ARGUMENT     UNSUPPORTED_PROTOCOL  fix its build/config; retry slowly (limit = supported version)
//	INVALID_ARGUMENT     WRONG_TARGET          fix its address book; retry slowly
//	INVALID_ARGUMENT     INVALID_ARGUMENT      (a LogPlayer bug: no Hello, LSN 0, empty slice) reconnect with backoff
//	FAILED_PRECONDITION  STALE_EPOCH           stop: a newer LogPlayer owns the target (IsFenced)
//	FAILED_PRECONDITION  OTHER_LOG             PERMANENT: the State is from another log; an operator re-seeds or resets
//	ABORTED              SUPERSEDED            ignore: a newer stream of its own replaced this one
//	ABORTED              CONTINUITY            reconnect, handshake, recover from the HelloAck's applied LSN
//	DATA_LOSS            APPLY_REJECTED        PERMANENT (IsPermanent): stop delivering to this target, alert
//	INTERNAL             INTERNAL              store failure: reconnect with backoff
//	UNAVAILABLE          SHUTTING_DOWN         reconnect with backoff
//	DEADLINE_EXCEEDED    TIMEOUT               no Hello in time: reconnect with backoff
//
// # Permanent refusals and how an operator resolves them
//
// APPLY_REJECTED means a committed delivery can never be applied by this
// target as configured: its Store.Apply returned an error wrapping
// ErrPermanent (use Permanent(lsn, err): for the reference shard, a message
// that is not a valid shardpb.Mutation), or a slice names a topic outside
// Config.Topics. Nothing of the refused batch is applied; the target's
// applied LSN stays just below the failing batch, and the error names the
// LSN (ErrorDetail.lsn). Retrying cannot help, so the LogPlayer stops
// delivering to the target (other targets carry on) and reports it. The
// operator, reading the LSN from the log line or ErrorDetail:
//
//  1. reads the transaction from the LogStore (Read with from_lsn = to_lsn = LSN);
//  2. either deploys a target build that understands the payload, or fixes
//     the LogPlayer's topic subscriptions (unknown topic), or, accepting that
//     this transaction's data is lost for this target, restarts the target
//     with the LSN in Config.SkipLSNs (the delivery is then applied as a
//     progress marker: offsets advance, data is dropped, a warning is logged);
//  3. lets the LogPlayer resume: it retries a blocked target every
//     PermanentRetry (a minute by default); removing and re-adding the target
//     through the admin API (logplayer.AddTarget/RemoveTarget) resumes it at once.
//
// # Snapshot and Restore
//
// A Store that also implements Snapshotter (target/snapshot.go; the shard
// and the SQL store do) answers the Snapshot and Restore RPCs, with which
// Clone (`logplayer target clone`) seeds a new target from a sibling once
// retention trimmed the log (docs/ARCHITECTURE.md "Bootstrapping a target
// from a sibling"). Restore runs on the applier goroutine, into an empty
// target only (TARGET_NOT_EMPTY), and ends the active stream so that the
// LogPlayer handshakes again from the restored applied LSN.
//
// # Goroutines
//
//   - applier (one per Server, started by NewServer, stopped by Close): the
//     only caller of the Store and the owner of the in-memory State, the
//     active stream and the highest session. Fed by the queue (capacity
//     queueBatches) with Hellos, batches and end-of-stream marks. A Hello is
//     handled alone; batches are grouped with everything queued while the
//     previous Apply ran (group commit, bounded by MaxGroupDeliveries and
//     MaxGroupBytes), checked, applied in one Apply, then acked. A Restore
//     is queued as an item too and runs alone.
//   - Deliver handler (one per stream, gRPC's goroutine): owns Send. It waits
//     for the Hello, sends the HelloAck and then the acks the applier
//     publishes (coalesced: acks are cumulative), and returns the stream's
//     final status.
//   - receiver (one per stream, started by the handler): owns Recv. It hands
//     the Hello to the handler, then pushes batches into the queue, blocking
//     when it is full by count (queueBatches) or by encoded bytes
//     (Config.MaxQueueBytes; gRPC flow control then pushes back on the
//     LogPlayer).
//
// Close waits for the handlers at most Config.CloseTimeout: a handler
// blocked in Send to a caller that stopped reading its acks ends only when
// the gRPC server stops or the connection breaks (Serve stops it).
//
// # Invariants
//
//   - The Store is never called concurrently; Apply sees strictly increasing
//     LSNs above the durable applied LSN and offsets that follow on per topic.
//   - An Ack for LSN x is sent only after an Apply covering x returned nil.
//   - At most one stream (the active one) has its batches applied; batches
//     queued by an overtaken stream are dropped, never applied.
//   - The persisted epoch never decreases; no stream with a lower epoch is
//     accepted once a higher one was stored.
package target
