package fetcher

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestRetryable: transient failures are retried on another node; a full
// replicated table (TABLE_FULL) and invalid requests are not.
func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unavailable", status.Error(codes.Unavailable, "x"), true},
		{"queue full", apierr.Newf(logstorepb.ErrorCode_QUEUE_FULL, "x"), true},
		{"not leader", apierr.Newf(logstorepb.ErrorCode_NOT_LEADER, "x"), true},
		{"table full", apierr.Newf(logstorepb.ErrorCode_TABLE_FULL, "x"), false},
		{"invalid", apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "x"), false},
		{"plain", errors.New("x"), true}, // codes.Unknown
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
