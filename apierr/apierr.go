// Package apierr is the one place where LogStore errors become gRPC statuses.
//
// Every non-OK status a LogStore node returns carries exactly one
// logstorepb.ErrorDetail whose Code is stable across releases; clients branch
// on Detail(err).Code (or on the gRPC code), never on the message text.
//
// The mapping of ErrorCode to gRPC code is fixed (see codeOf) so the same
// reason always travels with the same status code:
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
	// ErrUnknownOutcome: the request reached Raft but its result is unknown
	// (leadership lost, deadline): it may or may not have been applied.
	ErrUnknownOutcome = errors.New("outcome unknown")
)

// codeOf is the fixed gRPC code of each ErrorCode.
func codeOf(c logstorepb.ErrorCode) codes.Code {
	switch c {
	case logstorepb.ErrorCode_NOT_LEADER, logstorepb.ErrorCode_SHUTTING_DOWN, logstorepb.ErrorCode_UNKNOWN_OUTCOME:
		return codes.Unavailable
	case logstorepb.ErrorCode_QUEUE_FULL, logstorepb.ErrorCode_TABLE_FULL:
		return codes.ResourceExhausted
	case logstorepb.ErrorCode_EMPTY_TRANSACTION, logstorepb.ErrorCode_INVALID_TOPIC,
		logstorepb.ErrorCode_DUPLICATE_TOPIC, logstorepb.ErrorCode_MESSAGE_TOO_LARGE,
		logstorepb.ErrorCode_REQUEST_TOO_LARGE, logstorepb.ErrorCode_INVALID_ARGUMENT,
		logstorepb.ErrorCode_SCHEMA_MISMATCH:
		return codes.InvalidArgument
	case logstorepb.ErrorCode_SEQUENCE_MISMATCH, logstorepb.ErrorCode_CONDITION_FAILED,
		logstorepb.ErrorCode_MEMBERSHIP, logstorepb.ErrorCode_FEATURE_NOT_ENABLED:
		return codes.FailedPrecondition
	case logstorepb.ErrorCode_UNKNOWN_PRODUCER, logstorepb.ErrorCode_PRODUCER_FENCED, logstorepb.ErrorCode_SEQUENCE_TOO_OLD,
		logstorepb.ErrorCode_SEQUENCE_REUSED:
		return codes.FailedPrecondition
	case logstorepb.ErrorCode_BELOW_RETENTION:
		return codes.OutOfRange
	case logstorepb.ErrorCode_UNKNOWN_TOPIC, logstorepb.ErrorCode_UNKNOWN_TARGET:
		return codes.NotFound
	case logstorepb.ErrorCode_STALE_EPOCH, logstorepb.ErrorCode_LOG_BEHIND_TARGET, logstorepb.ErrorCode_OTHER_LOG:
		return codes.FailedPrecondition
	case logstorepb.ErrorCode_SUPERSEDED, logstorepb.ErrorCode_CONTINUITY:
		return codes.Aborted
	case logstorepb.ErrorCode_WRONG_TARGET, logstorepb.ErrorCode_UNSUPPORTED_PROTOCOL:
		return codes.InvalidArgument
	case logstorepb.ErrorCode_APPLY_REJECTED:
		return codes.DataLoss
	case logstorepb.ErrorCode_UNAUTHENTICATED:
		return codes.Unauthenticated
	case logstorepb.ErrorCode_PERMISSION_DENIED:
		return codes.PermissionDenied
	default:
		return codes.Internal
	}
}

// New returns a gRPC status error with code derived from ec and an
// ErrorDetail{Code: ec} that fill (may be nil) completes.
func New(ec logstorepb.ErrorCode, msg string, fill func(*logstorepb.ErrorDetail)) error {
	d := &logstorepb.ErrorDetail{Code: ec}
	if fill != nil {
		fill(d)
	}
	st := status.New(codeOf(ec), msg)
	withDetail, err := st.WithDetails(d)
	if err != nil {
		// WithDetails fails only for a non-OK code it cannot marshal; ours
		// always marshal, so this is a programmer error.
		panic(fmt.Sprintf("apierr: attach detail %v: %v", ec, err))
	}
	return withDetail.Err()
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
	if Detail(err) != nil {
		return err
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
	case errors.Is(err, context.DeadlineExceeded):
		return withCode(codes.DeadlineExceeded, logstorepb.ErrorCode_UNKNOWN_OUTCOME, err.Error())
	case errors.Is(err, context.Canceled):
		return withCode(codes.Canceled, logstorepb.ErrorCode_UNKNOWN_OUTCOME, err.Error())
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return err
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

// WithDetail returns a status error with code c carrying d.
func WithDetail(c codes.Code, msg string, d *logstorepb.ErrorDetail) error {
	st, err := status.New(c, msg).WithDetails(d)
	if err != nil {
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
