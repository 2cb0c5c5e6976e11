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

func TestNewCarriesDetail(t *testing.T) {
	err := New(logstorepb.ErrorCode_NOT_LEADER, "go there", func(d *logstorepb.ErrorDetail) {
		d.LeaderAddress = "127.0.0.1:7001"
	})
	if got := status.Code(err); got != codes.Unavailable {
		t.Fatalf("code = %v, want Unavailable", got)
	}
	d := Detail(err)
	if d == nil || d.Code != logstorepb.ErrorCode_NOT_LEADER || d.LeaderAddress != "127.0.0.1:7001" {
		t.Fatalf("detail = %v", d)
	}
}

func TestStatusMapsSentinels(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
		ec   logstorepb.ErrorCode
	}{
		{fmt.Errorf("append: %w", ErrNotLeader), codes.Unavailable, logstorepb.ErrorCode_NOT_LEADER},
		{ErrQueueFull, codes.ResourceExhausted, logstorepb.ErrorCode_QUEUE_FULL},
		{ErrShuttingDown, codes.Unavailable, logstorepb.ErrorCode_SHUTTING_DOWN},
		{ErrUnknownOutcome, codes.Unavailable, logstorepb.ErrorCode_TIMEOUT},
		{context.DeadlineExceeded, codes.DeadlineExceeded, logstorepb.ErrorCode_TIMEOUT},
		{errors.New("disk on fire"), codes.Internal, logstorepb.ErrorCode_INTERNAL},
		{Newf(logstorepb.ErrorCode_CONDITION_FAILED, "x"), codes.FailedPrecondition, logstorepb.ErrorCode_CONDITION_FAILED},
	} {
		got := Status(tc.err)
		if status.Code(got) != tc.code || CodeOf(got) != tc.ec {
			t.Errorf("Status(%v) = %v / %v, want %v / %v", tc.err, status.Code(got), CodeOf(got), tc.code, tc.ec)
		}
	}
	if Status(nil) != nil || Detail(nil) != nil || Detail(errors.New("plain")) != nil {
		t.Error("nil or plain errors must map to nil")
	}
}
