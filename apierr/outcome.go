package apierr

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Applied answers "did my request write?" for a failed request: the wire
// enum logstorepb.Applied, which every LogStore error carries in its
// ErrorDetail (docs/ARCHITECTURE.md, "Did this write?"). AppliedOf is the
// one place it is read.
type Applied = logstorepb.Applied

// The three answers (APPLIED_UNSPECIFIED is only ever on the wire, from a
// server older than the field; AppliedOf never returns it).
const (
	// AppliedNo: this attempt changed nothing (refused before Raft, never
	// sent, or refused by apply). Sending the request again is not a
	// duplicate of this attempt.
	AppliedNo = logstorepb.Applied_APPLIED_NO
	// AppliedMaybe: this attempt may have committed. Only a request that
	// is harmless twice may be sent again before the outcome is learned.
	AppliedMaybe = logstorepb.Applied_APPLIED_MAYBE
	// AppliedYes: the request committed (a nil error, or an error the
	// server sent after the commit).
	AppliedYes = logstorepb.Applied_APPLIED_YES
)

// ErrNotSent marks the failure of a request that never left this process:
// its connection never became ready (dial failure, connection refused),
// or its context ended before it was sent. AppliedOf answers AppliedNo.
// Wrap with NotSent; test with errors.Is.
var ErrNotSent = errors.New("request not sent")

// NotSent returns err (its message unchanged) marked as ErrNotSent: the
// caller knows the request was not sent. nil stays nil.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return &notSent{err}
}

type notSent struct{ err error }

func (e *notSent) Error() string        { return e.err.Error() }
func (e *notSent) Unwrap() error        { return e.err }
func (e *notSent) Is(target error) bool { return target == ErrNotSent }

// kind says what an answer is about; with the Applied outcome it decides
// the retry class (Classify).
type kind uint8

const (
	// final: about the request itself (invalid, a failed condition or
	// sequence, refused by policy, a full replicated table): every node
	// answers the same, every time.
	final kind = iota
	// transient: about the node or the moment (not the leader, queue
	// full, shutting down, outcome unknown, the connection): another node
	// or a later try may answer otherwise.
	transient
	// fault: the node failed in a way that says nothing about the request
	// and may fail the same way again (INTERNAL; a target's ABORTED).
	fault
)

// A rule is what the one table says of an ErrorCode.
type rule struct {
	grpc    codes.Code // the gRPC code of every status with this ErrorCode
	applied Applied    // the outcome when the server did not state one
	kind    kind
}

// rules is the one table of error codes: each ErrorCode's gRPC code, the
// outcome of a request refused with it when the error does not state one
// (a server older than ErrorDetail.applied), and what it is about. A code
// missing here is a test failure (TestEveryCodeHasAnOutcome), not a
// silent default. Every refusal that reaches apply (sequence, condition,
// producer, TABLE_FULL) is AppliedNo: the FSM refuses with no effect on
// any replica (logstore/fsm/apply.go).
var rules = map[logstorepb.ErrorCode]rule{
	logstorepb.ErrorCode_NOT_LEADER:      {codes.Unavailable, AppliedNo, transient},
	logstorepb.ErrorCode_QUEUE_FULL:      {codes.ResourceExhausted, AppliedNo, transient},
	logstorepb.ErrorCode_SHUTTING_DOWN:   {codes.Unavailable, AppliedNo, transient},
	logstorepb.ErrorCode_UNKNOWN_OUTCOME: {codes.Unavailable, AppliedMaybe, transient},
	logstorepb.ErrorCode_INTERNAL:        {codes.Internal, AppliedMaybe, fault},

	logstorepb.ErrorCode_EMPTY_TRANSACTION: {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_INVALID_TOPIC:     {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_DUPLICATE_TOPIC:   {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_MESSAGE_TOO_LARGE: {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_REQUEST_TOO_LARGE: {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_INVALID_ARGUMENT:  {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_SCHEMA_MISMATCH:   {codes.InvalidArgument, AppliedNo, final},

	logstorepb.ErrorCode_SEQUENCE_MISMATCH:       {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_CONDITION_FAILED:        {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_MEMBERSHIP:              {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_FEATURE_NOT_ENABLED:     {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_UNKNOWN_PRODUCER:        {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_PRODUCER_FENCED:         {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_SEQUENCE_TOO_OLD:        {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_SEQUENCE_REUSED:         {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED: {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_TABLE_FULL:              {codes.ResourceExhausted, AppliedNo, final},

	logstorepb.ErrorCode_BELOW_RETENTION: {codes.OutOfRange, AppliedNo, final},
	// A read's refusal: nothing written; another node may have the LSNs
	// on disk, the same node fails the same way (logstore/tier).
	logstorepb.ErrorCode_TIER_CHECKSUM:  {codes.DataLoss, AppliedNo, fault},
	logstorepb.ErrorCode_UNKNOWN_TOPIC:  {codes.NotFound, AppliedNo, final},
	logstorepb.ErrorCode_UNKNOWN_TARGET: {codes.NotFound, AppliedNo, final},

	logstorepb.ErrorCode_UNAUTHENTICATED:   {codes.Unauthenticated, AppliedNo, final},
	logstorepb.ErrorCode_PERMISSION_DENIED: {codes.PermissionDenied, AppliedNo, final},

	// Target refusals (Deliver stream): the delivery refused was not
	// applied (the target stores its position atomically with its data).
	// The LogPlayer learns what a target holds from its acks and its
	// Hello's applied LSN, never from this field.
	logstorepb.ErrorCode_STALE_EPOCH:          {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_LOG_BEHIND_TARGET:    {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_OTHER_LOG:            {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_SUPERSEDED:           {codes.Aborted, AppliedNo, fault},
	logstorepb.ErrorCode_CONTINUITY:           {codes.Aborted, AppliedNo, fault},
	logstorepb.ErrorCode_WRONG_TARGET:         {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_UNSUPPORTED_PROTOCOL: {codes.InvalidArgument, AppliedNo, final},
	logstorepb.ErrorCode_APPLY_REJECTED:       {codes.DataLoss, AppliedNo, final},

	// Target Snapshot/Restore refusals (target/snapshot.go): nothing changed.
	logstorepb.ErrorCode_TARGET_NOT_EMPTY:     {codes.FailedPrecondition, AppliedNo, final},
	logstorepb.ErrorCode_SNAPSHOT_UNSUPPORTED: {codes.Unimplemented, AppliedNo, final},
	logstorepb.ErrorCode_SNAPSHOT_MISMATCH:    {codes.InvalidArgument, AppliedNo, final},
}

// transportRule is the rule of an error without an ErrorDetail code: one
// that never came from a LogStore handler (the connection, the deadline,
// gRPC itself) or a code this build does not know. Only what surely ran
// nothing is AppliedNo (UNIMPLEMENTED: the server has no such method);
// everything else may have been sent and committed.
func transportRule(c codes.Code) rule {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		return rule{c, AppliedMaybe, transient}
	case codes.Unimplemented:
		return rule{c, AppliedNo, final}
	case codes.ResourceExhausted, codes.Internal, codes.Unknown:
		// RESOURCE_EXHAUSTED without a detail is gRPC's message size
		// limit, which may be the response's (after the commit).
		return rule{c, AppliedMaybe, fault}
	}
	return rule{c, AppliedMaybe, final}
}

// ruleOf returns the rule that err's answer falls under (err not nil).
func ruleOf(err error) rule {
	if errors.Is(err, ErrNotSent) {
		return rule{codes.Unavailable, AppliedNo, transient}
	}
	if d := Detail(err); d != nil {
		if r, ok := rules[d.Code]; ok {
			return r
		}
	}
	if _, ok := status.FromError(err); !ok && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return transportRule(codes.DeadlineExceeded) // a context ended, not known to be before sending
	}
	return transportRule(status.Code(err)) // codes.Unknown for a non-gRPC error
}

// AppliedOf says whether the request that failed with err wrote: the one
// function that answers it, for every caller (client, producer,
// storeconn, the LogPlayer). nil: AppliedYes. An error marked NotSent:
// AppliedNo. A LogStore error: the applied field of its ErrorDetail, or,
// from a server older than the field, its code's default (rules). Any
// other error (the connection broke, the deadline passed, a non-gRPC
// error): AppliedMaybe, except gRPC UNIMPLEMENTED (AppliedNo). It is about
// this attempt only: a caller that sent the request before combines its
// attempts (any AppliedMaybe makes the request's outcome AppliedMaybe).
func AppliedOf(err error) Applied {
	if err == nil {
		return AppliedYes
	}
	if !errors.Is(err, ErrNotSent) {
		if d := Detail(err); d != nil && d.Applied != logstorepb.Applied_APPLIED_UNSPECIFIED {
			return d.Applied
		}
	}
	return ruleOf(err).applied
}

// WithApplied returns Status(err) stating a instead of its code's default:
// for a server that knows better (an apply refusal is AppliedNo whatever
// its code). nil stays nil.
func WithApplied(err error, a Applied) error {
	err = Status(err)
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	d := proto.Clone(Detail(err)).(*logstorepb.ErrorDetail)
	d.Applied = a
	return WithDetail(st.Code(), st.Message(), d)
}

// withApplied returns d with Applied set to the default of its code (the
// rule of gRPC code c when the ErrorCode has none) when it states none; d
// itself when it does (d is never modified).
func withApplied(c codes.Code, d *logstorepb.ErrorDetail) *logstorepb.ErrorDetail {
	if d.Applied != logstorepb.Applied_APPLIED_UNSPECIFIED {
		return d
	}
	r, ok := rules[d.Code]
	if !ok {
		r = transportRule(c)
	}
	d = proto.Clone(d).(*logstorepb.ErrorDetail)
	d.Applied = r.applied
	return d
}
