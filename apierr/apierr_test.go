package apierr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

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
		{ErrUnknownOutcome, codes.Unavailable, logstorepb.ErrorCode_UNKNOWN_OUTCOME},
		{context.DeadlineExceeded, codes.DeadlineExceeded, logstorepb.ErrorCode_UNKNOWN_OUTCOME},
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

// TestEncodeDecode: an error travels through a batch result unchanged:
// gRPC code, message and detail; a plain error becomes INTERNAL as Status
// would make it.
func TestEncodeDecode(t *testing.T) {
	for name, err := range map[string]error{
		"detail":    New(logstorepb.ErrorCode_CONDITION_FAILED, "topic a at 3", func(d *logstorepb.ErrorDetail) { d.Topic, d.ActualNextOffset = "a", 3 }),
		"no detail": status.Error(codes.Unavailable, "conn reset"),
		"sentinel":  ErrQueueFull,
		"plain":     errors.New("boom"),
	} {
		want := Status(err)
		got := Decode(Encode(err))
		if status.Code(got) != status.Code(want) || status.Convert(got).Message() != status.Convert(want).Message() ||
			!proto.Equal(Detail(got), Detail(want)) {
			t.Errorf("%s: decoded %v, want %v", name, got, want)
		}
	}
	if err := Decode(&logstorepb.AppendError{}); status.Code(err) != codes.Internal {
		t.Errorf("code OK decoded as %v, want INTERNAL", err)
	}
}

// UNKNOWN_OUTCOME is the new name of TIMEOUT: the same number on the wire
// (old clients decode it as TIMEOUT), printed by its new name, and the old
// name still parses.
func TestUnknownOutcomeKeepsTimeoutReadable(t *testing.T) {
	if logstorepb.ErrorCode_TIMEOUT != logstorepb.ErrorCode_UNKNOWN_OUTCOME || logstorepb.ErrorCode_UNKNOWN_OUTCOME != 13 {
		t.Fatalf("numbers: TIMEOUT %d, UNKNOWN_OUTCOME %d", logstorepb.ErrorCode_TIMEOUT, logstorepb.ErrorCode_UNKNOWN_OUTCOME)
	}
	if s := logstorepb.ErrorCode_UNKNOWN_OUTCOME.String(); s != "UNKNOWN_OUTCOME" {
		t.Fatalf("name %q", s)
	}
	for _, name := range []string{"TIMEOUT", "UNKNOWN_OUTCOME"} {
		var d logstorepb.ErrorDetail
		if err := protojson.Unmarshal([]byte(`{"code":"`+name+`"}`), &d); err != nil || d.Code != logstorepb.ErrorCode_UNKNOWN_OUTCOME {
			t.Fatalf("json %s: %v %v", name, d.Code, err)
		}
	}
}

// TestEveryCodeMapped: every declared ErrorCode but INTERNAL (and the
// unset 0) has its own gRPC code, so a code added to the proto and
// forgotten in codeOf shows up here instead of as INTERNAL on the wire;
// SEQUENCE_REUSED is a final FAILED_PRECONDITION (never retried as is).
func TestEveryCodeMapped(t *testing.T) {
	for n := range logstorepb.ErrorCode_name {
		ec := logstorepb.ErrorCode(n)
		if ec == logstorepb.ErrorCode_INTERNAL || ec == logstorepb.ErrorCode_ERROR_CODE_UNSPECIFIED {
			continue
		}
		if c := codeOf(ec); c == codes.Internal {
			t.Errorf("%v maps to INTERNAL", ec)
		}
	}
	err := Newf(logstorepb.ErrorCode_SEQUENCE_REUSED, "x")
	if status.Code(err) != codes.FailedPrecondition || Classify(err) != Final {
		t.Errorf("SEQUENCE_REUSED: %v, %v", status.Code(err), Classify(err))
	}
}
