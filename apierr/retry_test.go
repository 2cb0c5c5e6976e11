package apierr

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestClassify pins the retry table: only errors that surely did not write
// are NotApplied (a write may be retried); unknown outcomes are
// MaybeApplied (only idempotent requests); node faults are retried by the
// LogPlayer only; a full replicated table (TABLE_FULL) and invalid
// requests are never retried. The rows are the client's and the fetcher's
// former tables (safe = NotApplied, transient = at most MaybeApplied,
// fetcher retryable = at most NodeFault).
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"not leader", Newf(logstorepb.ErrorCode_NOT_LEADER, "x"), NotApplied},
		{"queue full", Newf(logstorepb.ErrorCode_QUEUE_FULL, "x"), NotApplied},
		{"shutting down", Newf(logstorepb.ErrorCode_SHUTTING_DOWN, "x"), NotApplied},
		{"outcome unknown", Newf(logstorepb.ErrorCode_UNKNOWN_OUTCOME, "x"), MaybeApplied},
		{"outcome unknown (old name)", Newf(logstorepb.ErrorCode_TIMEOUT, "x"), MaybeApplied},
		{"feature not enabled", Newf(logstorepb.ErrorCode_FEATURE_NOT_ENABLED, "x"), Final},
		{"outcome unknown (deadline)", Status(ErrUnknownOutcome), MaybeApplied},
		{"transport", status.Error(codes.Unavailable, "conn reset"), MaybeApplied},
		{"deadline", status.Error(codes.DeadlineExceeded, "slow"), MaybeApplied},
		{"cancelled", status.Error(codes.Canceled, "gone"), MaybeApplied},
		{"aborted", status.Error(codes.Aborted, "x"), MaybeApplied},
		{"internal", Newf(logstorepb.ErrorCode_INTERNAL, "x"), NodeFault},
		{"internal without detail", status.Error(codes.Internal, "x"), NodeFault},
		{"resource exhausted without detail", status.Error(codes.ResourceExhausted, "x"), NodeFault},
		{"plain", errors.New("x"), NodeFault}, // codes.Unknown
		{"superseded", Newf(logstorepb.ErrorCode_SUPERSEDED, "x"), NodeFault},
		{"table full", Newf(logstorepb.ErrorCode_TABLE_FULL, "x"), Final},
		{"condition", Newf(logstorepb.ErrorCode_CONDITION_FAILED, "x"), Final},
		{"sequence", Newf(logstorepb.ErrorCode_SEQUENCE_MISMATCH, "x"), Final},
		{"invalid", Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "x"), Final},
		{"invalid topic", Newf(logstorepb.ErrorCode_INVALID_TOPIC, "x"), Final},
		{"below retention", Newf(logstorepb.ErrorCode_BELOW_RETENTION, "x"), Final},
		{"stale epoch", Newf(logstorepb.ErrorCode_STALE_EPOCH, "x"), Final},
		{"not found without detail", status.Error(codes.NotFound, "x"), Final},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBelowRetention(t *testing.T) {
	err := New(logstorepb.ErrorCode_BELOW_RETENTION, "x", func(d *logstorepb.ErrorDetail) { d.OldestLsn = 11 })
	if oldest, ok := BelowRetention(err); !ok || oldest != 11 {
		t.Fatalf("BELOW_RETENTION: %d, %v", oldest, ok)
	}
	if oldest, ok := BelowRetention(status.Error(codes.OutOfRange, "x")); !ok || oldest != 0 {
		t.Fatalf("OUT_OF_RANGE: %d, %v", oldest, ok)
	}
	for _, err := range []error{Newf(logstorepb.ErrorCode_NOT_LEADER, "x"), errors.New("x"), status.Error(codes.Unavailable, "x")} {
		if _, ok := BelowRetention(err); ok {
			t.Errorf("%v: below retention", err)
		}
	}
}
