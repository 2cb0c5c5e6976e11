// Package shard is the reference LogPlayer target: a key-value storage shard
// on bbolt, the WAL-apply use case of the LogPlayer paper (docs/DESIGN.md, "Targets").
//
// A database transaction whose keys live on several shards is one LogStore
// transaction with one slice per shard topic ("shard-N"); each message value
// is a shardpb.Mutation (PUT or DELETE, see EncodePut, EncodeDelete,
// DecodeMutation). The shard serves two gRPC services on one server:
// Target (package target: handshake, fencing, continuity, group commit,
// acks) and Shard (Get, Scan, WaitApplied for read-your-writes: wait for the
// Append's LSN, then read).
//
// Durability: the store applies a group of deliveries and writes the applied
// LSN, the per-topic next offsets and the highest epoch in the SAME bbolt
// transaction; bbolt fsyncs on commit (NoSync is never set). A crash at any
// point leaves the data and the applied LSN of one commit, never a mix, so
// redelivering from the applied LSN + 1 yields exactly the state of the log.
// A malformed mutation fails its whole group before anything is written,
// and the SDK refuses it permanently (APPLY_REJECTED, naming the LSN).
//
// Reads run in bbolt read transactions, concurrent with the applier; each
// answer carries the applied LSN it reflects.
//
// ModelApply computes the expected state of a shard from the log, for tests.
//
// Running it: Run(ctx, Config) is the whole life of a shard process (open,
// listen on Config.Addr, serve until ctx is done, close); Open + Serve +
// Close when the caller owns the listener; Register to add both services to
// a caller's grpc.Server. Config documents each default.
//
// # Goroutines
//
// Those of package target (one applier, and per delivery stream a handler and
// a receiver) plus gRPC's own per-RPC goroutines for reads. The applier is
// the only writer of the bbolt file; readers wait in WaitApplied on a channel
// the applier closes after each commit.
package shard
