// Package dispatcher turns committed transactions into per-target messages
// and holds every target's queue (the paper's Algorithm 3 plus the queue
// side of Algorithm 5: target return and recovery ranges, progress markers).
//
// # Goroutines
//
// None. The dispatcher is decision logic behind one mutex; the logplayer
// engine calls it from its goroutines:
//   - the main fetcher calls Dispatch for every transaction of the main
//     stream, densely from startLSN+1;
//   - a recovery fetcher per returning target calls PushCatchup for its range
//     and then FetchingCompleted;
//   - a target's sender calls NextBatchForTerm, its receiver calls AckTerm
//     (both refuse a stale term; the unchecked NextBatch and Ack exist for
//     tests only, in export_test.go), its connection manager calls Return
//     and Suspend;
//   - a progress ticker calls Progress; metrics call Stats.
//
// Methods return what the caller must do next (targets to wake, targets to
// disconnect, a recovery range to fetch); callers do it outside the lock.
//
// # The lock
//
// One mutex, d.mu, guards every target's queue, last ack, recovery range and
// counters, and currentLSN. It is held only for in-memory work: never across
// I/O, a channel send or a log call. Because Dispatch reads each target's
// term and advances currentLSN under the same lock that Return holds while it
// bumps the term and reads currentLSN, every transaction is either dispatched
// entirely before a return (so it is at or below the recovery range's end and
// the recovery stream delivers it) or entirely after it (so it is pushed to
// the normal queue with the new term): never lost between the two, never in
// both. This is the bug class the paper's model checking found.
//
// # Numbers
//
// LSNs are types.LSN and terms types.Term; the transactions (logstorepb)
// keep uint64 fields and are converted where they are read. The term here
// is the dispatcher's per-target generation (docs/DESIGN.md, "Glossary"), never the
// Hello's session nor a raft term.
//
// # Invariants
//
//   - currentLSN only grows, by exactly one per Dispatch (a gap or repeat
//     panics with the numbers).
//   - A target's recovery range for term t is (From, To] with To = currentLSN
//     at the Return that started term t; catchup pushes of term t carry LSNs
//     in that range, main-stream pushes of term t carry LSNs above To. So
//     within a term every catchup LSN is below every normal LSN.
//   - lastAck only grows, except at Return, where the handshake's durable
//     applied LSN is the truth.
//   - Nothing with LSN <= lastAck is pushed.
//
// # How it is checked
//
// Beside the table tests:
//   - conformance_test.go explores every interleaving of the protocol's
//     actions (main fetcher, recovery fetchers - stale ones included -,
//     senders, target applies, acks, progress ticker, target crashes and
//     returns, LogPlayer restarts) on this real code for 2 targets and small
//     bounds (states that behave alike merged, plus a partial-order
//     reduction checked against the full search), the same model as
//     tla/LogPlayer.tla, checking in-order
//     exactly-once delivery at every apply and complete delivery whenever
//     only failures could still happen; mutations of the safety mechanisms
//     (terms, the last-ack filter, the atomic return) must be caught.
//     Bigger bounds: go test ./dispatcher -run TestConformance
//     -conformance.messages=4 -conformance.failures=2.
//   - sim_test.go drives the same world with random steps: 2-5 targets,
//     random subscriptions, small queue bounds, many failures, and compares
//     each target's applied sequence with a naive oracle. -sim.seed replays
//     one run, -sim.runs sets how many.
//   - concurrent_test.go runs it under real goroutines for -race.
package dispatcher
