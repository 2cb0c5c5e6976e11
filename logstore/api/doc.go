// Package api is the LogStore's gRPC edge, carved out of the node (issue
// #26): everything between a request on the wire and the Raft log.
//
//   - Validation of every request (validate.go: the typed INVALID_ARGUMENT
//     errors, the limits of names, messages, requests and AppendBatch
//     calls) and the admission of an Append (admission.go: producer dedup
//     first, then validation, then the declared schemas, all read from the
//     replicated state); producer names against the caller's grants
//     (producerauth.go).
//   - The gRPC handlers of the LogStore, Cluster and PlayerGroup services
//     (server.go, batch.go, producer.go, topics.go, group.go, backup.go),
//     registered by Register.
//   - The Aggregator (aggregator.go, intakebytes.go): the bounded intake
//     that puts concurrent commands into one Raft entry. The node sends
//     its own commands (member registration, cluster version, log
//     identity) through the same Aggregator.
//   - The mapping of Raft's errors to what a request did (rafterr.go:
//     whether the entry entered the log, then apierr.Status).
//
// The node is behind the Node interface (node.go), which the edge owns:
// the node's Raft instance (Raft: role, leader, terms, membership), a view
// of the applied state under its lock (View, Head, HeadChanged), the
// segment log for reads (Log), and the node's lifecycle signals
// (CaughtUp, SupportedVersion, ReadsEnded, OpenBackup). Writes reach the
// log only through the Aggregator. logstore.Node implements Node
// (logstore/edge.go) and wires the edge in Node.RegisterServices.
//
// # Goroutines
//
//   - Aggregator.run: fed by the handlers (Submit, and AppendBatch's
//     enqueue) through the intake channel (capacity
//     AggregatorConfig.IntakeQueue, and IntakeQueueBytes in bytes); owns
//     the batch being built, the count of entries in flight, the convoy
//     hold and the last timestamp.
//   - Aggregator.complete: fed by run through the inflight channel
//     (capacity MaxInflightEntries); owns the Raft futures, answers each
//     waiting request and tells run through freed that an entry resolved.
//     It waits on each future through a short-lived goroutine
//     (Aggregator.await) so that, once closed, it abandons a future
//     hashicorp/raft will never resolve.
//   - The handlers run on gRPC's goroutines: writes block in the
//     Aggregator until their entry applies (or ctx ends); Read and
//     ReadTopic streams wait at the head on Node.HeadChanged until ctx
//     ends or Node.ReadsEnded is closed.
//
// The server holds no locks of its own; Node.View holds the state's lock
// for the length of its callback only.
package api
