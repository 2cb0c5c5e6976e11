package apierr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// contract is one row of the error contract (docs/ARCHITECTURE.md, "Did
// this write?"): the gRPC code, whether the request wrote, and how far it
// may be retried.
type contract struct {
	grpc    codes.Code
	applied Applied
	retry   Outcome
}

// wantByCode lists every ErrorCode. TestEveryCodeHasAnOutcome walks the
// enum's descriptor, so a code added to the proto without a row here (and
// a rule in apierr) fails.
var wantByCode = map[logstorepb.ErrorCode]contract{
	logstorepb.ErrorCode_NOT_LEADER:      {codes.Unavailable, AppliedNo, NotApplied},
	logstorepb.ErrorCode_QUEUE_FULL:      {codes.ResourceExhausted, AppliedNo, NotApplied},
	logstorepb.ErrorCode_SHUTTING_DOWN:   {codes.Unavailable, AppliedNo, NotApplied},
	logstorepb.ErrorCode_UNKNOWN_OUTCOME: {codes.Unavailable, AppliedMaybe, MaybeApplied},
	logstorepb.ErrorCode_INTERNAL:        {codes.Internal, AppliedMaybe, NodeFault},

	logstorepb.ErrorCode_EMPTY_TRANSACTION: {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_INVALID_TOPIC:     {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_DUPLICATE_TOPIC:   {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_MESSAGE_TOO_LARGE: {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_REQUEST_TOO_LARGE: {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_INVALID_ARGUMENT:  {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_SCHEMA_MISMATCH:   {codes.InvalidArgument, AppliedNo, Final},

	logstorepb.ErrorCode_SEQUENCE_MISMATCH:       {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_CONDITION_FAILED:        {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_MEMBERSHIP:              {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_FEATURE_NOT_ENABLED:     {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_UNKNOWN_PRODUCER:        {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_PRODUCER_FENCED:         {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_SEQUENCE_TOO_OLD:        {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_SEQUENCE_REUSED:         {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED: {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_TABLE_FULL:              {codes.ResourceExhausted, AppliedNo, Final},

	logstorepb.ErrorCode_BELOW_RETENTION: {codes.OutOfRange, AppliedNo, Final},
	logstorepb.ErrorCode_TIER_CHECKSUM:   {codes.DataLoss, AppliedNo, NodeFault},
	logstorepb.ErrorCode_UNKNOWN_TOPIC:   {codes.NotFound, AppliedNo, Final},
	logstorepb.ErrorCode_UNKNOWN_TARGET:  {codes.NotFound, AppliedNo, Final},

	logstorepb.ErrorCode_UNAUTHENTICATED:   {codes.Unauthenticated, AppliedNo, Final},
	logstorepb.ErrorCode_PERMISSION_DENIED: {codes.PermissionDenied, AppliedNo, Final},

	logstorepb.ErrorCode_STALE_EPOCH:          {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_LOG_BEHIND_TARGET:    {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_OTHER_LOG:            {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_SUPERSEDED:           {codes.Aborted, AppliedNo, NodeFault},
	logstorepb.ErrorCode_CONTINUITY:           {codes.Aborted, AppliedNo, NodeFault},
	logstorepb.ErrorCode_WRONG_TARGET:         {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_UNSUPPORTED_PROTOCOL: {codes.InvalidArgument, AppliedNo, Final},
	logstorepb.ErrorCode_APPLY_REJECTED:       {codes.DataLoss, AppliedNo, Final},
	logstorepb.ErrorCode_TARGET_NOT_EMPTY:     {codes.FailedPrecondition, AppliedNo, Final},
	logstorepb.ErrorCode_SNAPSHOT_UNSUPPORTED: {codes.Unimplemented, AppliedNo, Final},
	logstorepb.ErrorCode_SNAPSHOT_MISMATCH:    {codes.InvalidArgument, AppliedNo, Final},
}

// TestEveryCodeHasAnOutcome: every ErrorCode of the proto (read from its
// descriptor) has a row above and a rule in apierr, and an error built for
// it carries the row's gRPC code and applied outcome, over the wire (the
// detail) and for an older server that sent no applied field (the rule's
// default).
func TestEveryCodeHasAnOutcome(t *testing.T) {
	values := logstorepb.ErrorCode(0).Descriptor().Values()
	seen := map[logstorepb.ErrorCode]bool{}
	for i := range values.Len() {
		ec := logstorepb.ErrorCode(values.Get(i).Number())
		if ec == logstorepb.ErrorCode_ERROR_CODE_UNSPECIFIED || seen[ec] {
			continue // UNSPECIFIED: no detail code, see TestTransportOutcomes; TIMEOUT aliases UNKNOWN_OUTCOME
		}
		seen[ec] = true
		want, ok := wantByCode[ec]
		if !ok {
			t.Errorf("%v: no row in the contract table (wantByCode)", ec)
			continue
		}
		if _, ok := rules[ec]; !ok {
			t.Errorf("%v: no rule in apierr (rules)", ec)
			continue
		}
		err := Newf(ec, "x")
		if got := status.Code(err); got != want.grpc {
			t.Errorf("%v: gRPC code %v, want %v", ec, got, want.grpc)
		}
		if d := Detail(err); d == nil || d.Applied != want.applied {
			t.Errorf("%v: detail %v, want applied %v on the wire", ec, d, want.applied)
		}
		if got := AppliedOf(err); got != want.applied {
			t.Errorf("%v: AppliedOf = %v, want %v", ec, got, want.applied)
		}
		if got := Classify(err); got != want.retry {
			t.Errorf("%v: Classify = %v, want %v", ec, got, want.retry)
		}
		old, _ := status.New(want.grpc, "x").WithDetails(&logstorepb.ErrorDetail{Code: ec})
		if got := AppliedOf(old.Err()); got != want.applied {
			t.Errorf("%v from a server without the applied field: AppliedOf = %v, want %v", ec, got, want.applied)
		}
		if got := AppliedOf(Decode(Encode(err))); got != want.applied {
			t.Errorf("%v through a batch result: AppliedOf = %v, want %v", ec, got, want.applied)
		}
	}
	for ec := range wantByCode {
		if !seen[ec] {
			t.Errorf("%v: a row for a code the proto does not have", ec)
		}
	}
	if len(rules) != len(seen) {
		t.Errorf("%d rules for %d codes", len(rules), len(seen))
	}
}

// TestServerStatesBetter: what a server states overrides the code's
// default, through New and WithApplied (which keeps code, message and
// the rest of the detail).
func TestServerStatesBetter(t *testing.T) {
	lost := New(logstorepb.ErrorCode_NOT_LEADER, "leadership lost after the entry went to Raft",
		func(d *logstorepb.ErrorDetail) { d.LeaderId, d.Applied = "n2", AppliedMaybe })
	if AppliedOf(lost) != AppliedMaybe || Classify(lost) != MaybeApplied {
		t.Fatalf("NOT_LEADER stating MAYBE: %v / %v, want maybe applied (not retried as a write)", AppliedOf(lost), Classify(lost))
	}
	refused := WithApplied(Newf(logstorepb.ErrorCode_INTERNAL, "kind not applied"), AppliedNo)
	if d := Detail(refused); AppliedOf(refused) != AppliedNo || d.Code != logstorepb.ErrorCode_INTERNAL ||
		status.Code(refused) != codes.Internal || status.Convert(refused).Message() != "kind not applied" {
		t.Fatalf("WithApplied: %v (%v)", refused, d)
	}
	if Classify(refused) != NodeFault {
		t.Fatalf("INTERNAL stating NO: %v, want node fault", Classify(refused))
	}
	if WithApplied(nil, AppliedNo) != nil {
		t.Fatal("WithApplied(nil) is not nil")
	}
	// A status without a detail leaves a server with one stating the
	// outcome its gRPC code implies.
	if d := Detail(Status(status.Error(codes.Unavailable, "peer gone"))); d == nil || d.Applied != AppliedMaybe {
		t.Fatalf("Status of a bare UNAVAILABLE: detail %v", d)
	}
}

// TestTransportOutcomes: errors that did not come from a LogStore handler.
// Only what surely was not sent (marked NotSent: a node whose connection
// never became ready, a context that ended before sending) or ran nothing
// (UNIMPLEMENTED) is AppliedNo; a broken connection or a deadline after
// sending may have committed.
func TestTransportOutcomes(t *testing.T) {
	dial := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		name    string
		err     error
		applied Applied
		retry   Outcome
	}{
		{"dial failure, not sent", NotSent(dial), AppliedNo, NotApplied},
		{"connection refused before sending, wrapped", fmt.Errorf("node 2: %w", NotSent(dial)), AppliedNo, NotApplied},
		{"context cancelled before sending", NotSent(context.Canceled), AppliedNo, NotApplied},
		{"deadline before sending", NotSent(context.DeadlineExceeded), AppliedNo, NotApplied},
		{"connection reset after sending", status.Error(codes.Unavailable, "error reading from server: EOF"), AppliedMaybe, MaybeApplied},
		{"deadline after sending", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), AppliedMaybe, MaybeApplied},
		{"cancelled after sending", status.Error(codes.Canceled, "context canceled"), AppliedMaybe, MaybeApplied},
		{"aborted without detail", status.Error(codes.Aborted, "x"), AppliedMaybe, MaybeApplied},
		{"a context error, not known to be before sending", context.DeadlineExceeded, AppliedMaybe, MaybeApplied},
		{"a cancelled context, not known to be before sending", fmt.Errorf("wait: %w", context.Canceled), AppliedMaybe, MaybeApplied},
		{"server ended by its context", Status(context.DeadlineExceeded), AppliedMaybe, MaybeApplied},
		{"no such method", status.Error(codes.Unimplemented, "unknown method Append"), AppliedNo, Final},
		{"message size limit", status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), AppliedMaybe, NodeFault},
		{"internal without detail", status.Error(codes.Internal, "x"), AppliedMaybe, NodeFault},
		{"non-gRPC error", errors.New("x"), AppliedMaybe, NodeFault},
		{"not found without detail", status.Error(codes.NotFound, "x"), AppliedMaybe, Final},
		{"an unknown ErrorCode from a newer server", WithDetail(codes.FailedPrecondition, "x", &logstorepb.ErrorDetail{Code: 999}), AppliedMaybe, Final},
		{"an unknown ErrorCode stating its outcome", WithDetail(codes.Unavailable, "x", &logstorepb.ErrorDetail{Code: 999, Applied: AppliedNo}), AppliedNo, NotApplied},
	} {
		if got := AppliedOf(tc.err); got != tc.applied {
			t.Errorf("%s: AppliedOf = %v, want %v", tc.name, got, tc.applied)
		}
		if got := Classify(tc.err); got != tc.retry {
			t.Errorf("%s: Classify = %v, want %v", tc.name, got, tc.retry)
		}
	}
	if AppliedOf(nil) != AppliedYes {
		t.Errorf("AppliedOf(nil) = %v, want yes", AppliedOf(nil))
	}
	if err := NotSent(context.Canceled); !errors.Is(err, context.Canceled) || err.Error() != context.Canceled.Error() {
		t.Errorf("NotSent hides what it wraps: %v", err)
	}
	if NotSent(nil) != nil {
		t.Error("NotSent(nil) is not nil")
	}
}
