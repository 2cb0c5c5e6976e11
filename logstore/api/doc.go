// Package api is the LogStore's gRPC edge, carved out of the node (issue
// #26). Today it holds what the edge decides about a request without the
// node: validation of every request (validate.go: the typed
// INVALID_ARGUMENT errors, the limits of names, messages, requests and
// AppendBatch calls) and the admission of an Append (admission.go:
// producer dedup first, then validation, then the declared schemas, all
// read from the replicated state). It reads the state only through
// fsm.State, under the caller's lock, and holds no goroutines or locks of
// its own.
//
// Still in package logstore: the gRPC handlers, the aggregator (batching
// into Raft) and the mapping of Raft and node errors to statuses; they
// reach the node's Raft, FSM and segment log directly (see
// docs/ARCHITECTURE.md, "Known gaps").
package api
