package apierr

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Outcome is how far a failed request may be retried: its Applied
// outcome (AppliedOf) joined with what the answer is about (the kind
// column of the rules table), so it is no second table of codes. The
// values are ordered from the safest to retry to the least: a caller names
// the worst outcome it retries (its retry limit) and retries an error when
// Classify(err) is at most that limit:
//
//	a write that must not apply twice     NotApplied
//	an idempotent request, a read         MaybeApplied
//	the LogPlayer, which must keep going  NodeFault (unary) or Final (streams, which stop on below-retention only)
//
// internal/storeconn applies it; a refusal that is the same on every node
// is never retried.
type Outcome uint8

const (
	// NotApplied: AppliedNo, and the answer is about the node or the
	// moment (NOT_LEADER, QUEUE_FULL, SHUTTING_DOWN, or never sent): any
	// request, a write too, may be sent again.
	NotApplied Outcome = iota + 1
	// MaybeApplied: AppliedMaybe, and the answer is about the node or the
	// moment (UNKNOWN_OUTCOME; without a detail: the connection broke,
	// the deadline passed, the call was cancelled or aborted): only a
	// request that is harmless twice may be sent again.
	MaybeApplied
	// NodeFault: the node failed in a way that says nothing about the
	// request and may fail the same way again (INTERNAL, UNKNOWN, a
	// non-gRPC error, RESOURCE_EXHAUSTED without a detail, a target's
	// ABORTED); AppliedOf says what it may have written.
	NodeFault
	// Final: the answer is about the request itself (invalid, a failed
	// condition or sequence, below retention, TABLE_FULL, which stays full
	// until rows are removed): every node answers the same. An error
	// stating AppliedYes is Final too: there is nothing left to do.
	Final
)

func (o Outcome) String() string {
	switch o {
	case NotApplied:
		return "not applied"
	case MaybeApplied:
		return "maybe applied"
	case NodeFault:
		return "node fault"
	case Final:
		return "final"
	}
	return "invalid outcome"
}

// Classify returns the retry Outcome of a request that failed with err
// (not nil): AppliedOf(err) and the kind of err's rule.
func Classify(err error) Outcome {
	applied := AppliedOf(err)
	switch k := ruleOf(err).kind; {
	case applied == AppliedYes:
		return Final
	case k == transient && applied == AppliedNo:
		return NotApplied
	case k == transient:
		return MaybeApplied
	case k == fault:
		return NodeFault
	}
	return Final
}

// BelowRetention reports whether err says that a read's position was
// deleted by retention: a BELOW_RETENTION detail (oldest is then the oldest
// LSN the node still holds) or any other OUT_OF_RANGE status (oldest 0:
// unknown).
func BelowRetention(err error) (oldest types.LSN, ok bool) {
	if d := Detail(err); d != nil && d.Code == logstorepb.ErrorCode_BELOW_RETENTION {
		return types.LSN(d.OldestLsn), true
	}
	return 0, status.Code(err) == codes.OutOfRange
}
