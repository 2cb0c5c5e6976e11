// Package apierr is the one place where LogStore errors become gRPC statuses.
//
// Every non-OK status a LogStore node returns carries exactly one
// logstorepb.ErrorDetail whose Code is stable across releases; clients branch
// on Detail(err).Code (or on the gRPC code), never on the message text. The
// detail's Applied says whether the request wrote (no, maybe, yes): every
// error built here states it, and AppliedOf is the one function that reads
// it (outcome.go; docs/ARCHITECTURE.md, "Did this write?").
//
// The mapping of ErrorCode to gRPC code is fixed (the rules table of
// outcome.go, with each code's default Applied) so the same reason always
// travels with the same status code:
//
//	NOT_LEADER, SHUTTING_DOWN          UNAVAILABLE
//	TIMEOUT                            UNAVAILABLE (outcome unknown)
//	QUEUE_FULL, TABLE_FULL             RESOURCE_EXHAUSTED
//	EMPTY_TRANSACTION, INVALID_TOPIC,
//	DUPLICATE_TOPIC, MESSAGE_TOO_LARGE,
//	REQUEST_TOO_LARGE, INVALID_ARGUMENT,
//	SCHEMA_MISMATCH                    INVALID_ARGUMENT
//	SEQUENCE_MISMATCH, CONDITION_FAILED,
//	MEMBERSHIP, UNKNOWN_PRODUCER,
//	PRODUCER_FENCED, SEQUENCE_TOO_OLD,
//	SEQUENCE_REUSED                    FAILED_PRECONDITION
//	BELOW_RETENTION                    OUT_OF_RANGE
//	UNKNOWN_TOPIC, UNKNOWN_TARGET      NOT_FOUND
//	INTERNAL                           INTERNAL
//
// Target refusals (the target SDK's Deliver stream) use the same mapping:
//
//	STALE_EPOCH                        FAILED_PRECONDITION (fenced: stop)
//	SUPERSEDED, CONTINUITY             ABORTED (reconnect and resync)
//	WRONG_TARGET, UNSUPPORTED_PROTOCOL INVALID_ARGUMENT (configuration error)
//	APPLY_REJECTED                     DATA_LOSS (permanent: never retry)
//	LOG_BEHIND_TARGET, OTHER_LOG       FAILED_PRECONDITION (permanent: the
//	                                   target and the log disagree; an operator acts)
//
// Security refusals (package security's interceptors):
//
//	UNAUTHENTICATED                    UNAUTHENTICATED
//	PERMISSION_DENIED                  PERMISSION_DENIED (topic or group set)
package apierr

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Sentinel errors that library code returns and Status maps. Wrap them with
// %w to add context; the mapping looks through wrapping.
var (
	// ErrNotLeader: this node is not the Raft leader; nothing was written.
	ErrNotLeader = errors.New("not the leader")
	// ErrQueueFull: the leader's intake queue is full; nothing was written.
	ErrQueueFull = errors.New("intake queue full")
	// ErrShuttingDown: the node is closing.
	ErrShuttingDown = errors.New("shutting down")
	// ErrTierChecksum: an object of tiered storage failed its checksum and
	// was not served (logstore/tier.ErrChecksum wraps it).
	ErrTierChecksum = errors.New("tiered storage object fails its checksum")
	// ErrUnknownOutcome: the request reached Raft but its result is unknown
	// (leadership lost, deadline): it may or may not have been applied.
	ErrUnknownOutcome = errors.New("outcome unknown")
)

// codeOf is the fixed gRPC code of each ErrorCode (the rules table).
func codeOf(c logstorepb.ErrorCode) codes.Code {
	if r, ok := rules[c]; ok {
		return r.grpc
	}
	return codes.Internal
}

// New returns a gRPC status error with code derived from ec and an
// ErrorDetail{Code: ec} that fill (may be nil) completes. The detail's
// Applied is ec's default (rules) unless fill sets it: a server that knows
// better states it there.
func New(ec logstorepb.ErrorCode, msg string, fill func(*logstorepb.ErrorDetail)) error {
	d := &logstorepb.ErrorDetail{Code: ec}
	if fill != nil {
		fill(d)
	}
	return WithDetail(codeOf(ec), msg, d)
}

// Newf is New with a formatted message and no extra detail fields.
func Newf(ec logstorepb.ErrorCode, format string, args ...any) error {
	return New(ec, fmt.Sprintf(format, args...), nil)
}

// Detail returns the ErrorDetail carried by a gRPC status error, or nil when
// err is nil, not a status, or carries none.
func Detail(err error) *logstorepb.ErrorDetail {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*logstorepb.ErrorDetail); ok {
			return ed
		}
	}
	return nil
}

// CodeOf returns Detail(err).Code, or ERROR_CODE_UNSPECIFIED.
func CodeOf(err error) logstorepb.ErrorCode {
	if d := Detail(err); d != nil {
		return d.Code
	}
	return logstorepb.ErrorCode_ERROR_CODE_UNSPECIFIED
}

// Status converts any error a LogStore handler produced into a gRPC status
// error with a detail: statuses that already carry a detail pass through,
// sentinels and context errors map to their codes, anything else is INTERNAL.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if d := Detail(err); d != nil {
		if d.Applied != logstorepb.Applied_APPLIED_UNSPECIFIED {
			return err
		}
		st := status.Convert(err)
		return WithDetail(st.Code(), st.Message(), d) // states Applied
	}
	switch {
	case errors.Is(err, ErrNotLeader):
		return New(logstorepb.ErrorCode_NOT_LEADER, err.Error(), nil)
	case errors.Is(err, ErrQueueFull):
		return New(logstorepb.ErrorCode_QUEUE_FULL, err.Error(), nil)
	case errors.Is(err, ErrShuttingDown):
		return New(logstorepb.ErrorCode_SHUTTING_DOWN, err.Error(), nil)
	case errors.Is(err, ErrUnknownOutcome):
		return New(logstorepb.ErrorCode_UNKNOWN_OUTCOME, err.Error(), nil)
	case errors.Is(err, ErrTierChecksum):
		return New(logstorepb.ErrorCode_TIER_CHECKSUM, err.Error(), nil)
	case errors.Is(err, context.DeadlineExceeded):
		return withCode(codes.DeadlineExceeded, logstorepb.ErrorCode_UNKNOWN_OUTCOME, err.Error())
	case errors.Is(err, context.Canceled):
		return withCode(codes.Canceled, logstorepb.ErrorCode_UNKNOWN_OUTCOME, err.Error())
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		// A status from elsewhere (gRPC, a call this node made): its code
		// stays; the detail states the outcome its code implies.
		return WithDetail(st.Code(), st.Message(), &logstorepb.ErrorDetail{})
	}
	return New(logstorepb.ErrorCode_INTERNAL, err.Error(), nil)
}

// withCode is New with an explicit gRPC code, for the two context cases
// whose code is dictated by gRPC conventions rather than by codeOf.
func withCode(c codes.Code, ec logstorepb.ErrorCode, msg string) error {
	return WithDetail(c, msg, &logstorepb.ErrorDetail{Code: ec})
}

// FromDetail returns a status error whose gRPC code is codeOf(d.Code),
// carrying d as it is.
func FromDetail(msg string, d *logstorepb.ErrorDetail) error {
	return WithDetail(codeOf(d.Code), msg, d)
}

// WithDetail returns a status error with code c carrying d; when d states
// no Applied, a copy of d with its code's default (rules; the rule of c
// for a code without one) is carried instead.
func WithDetail(c codes.Code, msg string, d *logstorepb.ErrorDetail) error {
	st, err := status.New(c, msg).WithDetails(withApplied(c, d))
	if err != nil {
		// WithDetails fails only for an OK code or a detail it cannot
		// marshal; ours always marshal, so this is a programmer error.
		panic(fmt.Sprintf("apierr: attach detail %v: %v", d.Code, err))
	}
	return st.Err()
}

// Encode turns the error a handler would return (any error; see Status)
// into its wire form inside a batch response, keeping code, message and
// detail.
func Encode(err error) *logstorepb.AppendError {
	st := status.Convert(Status(err))
	return &logstorepb.AppendError{GrpcCode: uint32(st.Code()), Message: st.Message(), Detail: Detail(st.Err())}
}

// Decode is Encode's inverse: the status error Append would have returned.
// An OK or missing code (a malformed answer) decodes as INTERNAL.
func Decode(e *logstorepb.AppendError) error {
	c := codes.Code(e.GetGrpcCode())
	if c == codes.OK {
		return New(logstorepb.ErrorCode_INTERNAL, "malformed batch result: error with code OK: "+e.GetMessage(), nil)
	}
	if e.GetDetail() == nil {
		return status.Error(c, e.GetMessage())
	}
	return WithDetail(c, e.GetMessage(), e.GetDetail())
}
