// Package fsm is the deterministic core of a LogStore node: the state a
// Raft entry is applied to (State), the apply step (Machine.Apply), the
// limits an entry is applied with (Limits, stamped by the leader), and the
// snapshot formats of that state (MarshalState, the archive header).
//
// Every replica applies the same entries to the same state and must write
// the same bytes, so apply reads nothing but the entry (commands, the
// leader's timestamp, the stamped limits) and the state: no clock, no
// configuration, no map order, no randomness. That is an import boundary,
// not a convention: imports_test.go fails if this package, or any package
// of this module it imports, imports time, os, net, randomness, the node
// (package logstore), the segment log or hashicorp/raft; nor anything
// under shard/ or target/: a declared topic's messages are checked by the
// validator registered for its schema in package logstore/schema. Log time is the
// entry's TimestampUnixNano; the segment log is reached through the small
// Log interface that *segment.Log implements.
//
// Machine is a plain, synchronous type with no goroutines and no locks:
// logstore's raft.FSM calls Apply on Raft's FSM goroutine and guards reads
// of State (Status, FetchOffsets, the retention floor) with its own mutex.
//
// Apply, per command: an Append goes through the idempotent-producer check
// (a registered producer's id, epoch and window of 5 sequences, see
// producer.go; or a legacy producer id + sequence), room in the capped group-offset table, its
// conditions (a topic's next offset, or a group's committed offset,
// checked before the txn's own commits), then gets the next dense LSN and
// dense per-topic offsets; NextEpoch, ReportConsumer, DeleteGroup,
// InitProducer and member registration change the state only. The entry's transactions go
// to the Log in one AppendBatch; a refused write panics (the replica can
// no longer follow the log). See package logstore's doc for the decisions
// (bounds, legacy limits) and docs/DESIGN.md, "Determinism".
package fsm
