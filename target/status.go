package target

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Refusal reasons: the values of the target_refusals_total{reason} label.
const (
	reasonProtocolVersion = "protocol_version" // Hello with a version this build does not speak
	reasonWrongTarget     = "wrong_target"     // Hello for another target id
	reasonStaleEpoch      = "stale_epoch"      // Hello epoch below the highest seen, or overtaken by a higher one
	reasonSuperseded      = "superseded"       // a newer stream of the same epoch took over
	reasonProtocol        = "protocol"         // malformed stream: no Hello first, second Hello, LSN 0, …
	reasonDuplicateLSN    = "duplicate_lsn"    // delivery LSN equal to the applied LSN
	reasonBackwardsLSN    = "backwards_lsn"    // delivery LSN below the applied LSN
	reasonOffsetGap       = "offset_gap"       // slice starts after its topic's next offset
	reasonOffsetOverlap   = "offset_overlap"   // slice starts before its topic's next offset
	reasonUnknownTopic    = "unknown_topic"    // slice for a topic outside Config.Topics
	reasonPermanent       = "permanent"        // Store.Apply returned a permanent error
	reasonStore           = "store"            // Store.Apply or State failed transiently
	reasonOtherLog        = "other_log"        // Hello from another log (cluster, or incarnation before a restore)
)

// refusal is why the SDK ends a stream: one reason, one stable ErrorCode.
type refusal struct {
	reason string
	code   logstorepb.ErrorCode
	msg    string
	detail *logstorepb.ErrorDetail
}

func refuse(reason string, code logstorepb.ErrorCode, detail *logstorepb.ErrorDetail, format string, args ...any) *refusal {
	if detail == nil {
		detail = &logstorepb.ErrorDetail{}
	}
	detail.Code = code
	return &refusal{reason: reason, code: code, msg: fmt.Sprintf(format, args...), detail: detail}
}

func (r *refusal) Error() string { return r.msg }

// beforeHello is the detail of a refusal before the Hello: no delivery was
// taken, so none was applied (docs/ARCHITECTURE.md, "Did this write?").
func beforeHello() *logstorepb.ErrorDetail {
	return &logstorepb.ErrorDetail{Applied: logstorepb.Applied_APPLIED_NO}
}

// status returns r as a gRPC status error carrying its ErrorDetail, with the
// gRPC code apierr fixes for its ErrorCode (TIMEOUT, a peer that did not
// answer in time, is DEADLINE_EXCEEDED).
func (r *refusal) status() error {
	if r.code == logstorepb.ErrorCode_TIMEOUT {
		return apierr.WithDetail(codes.DeadlineExceeded, "target: "+r.msg, r.detail)
	}
	return apierr.FromDetail("target: "+r.msg, r.detail)
}

// Detail returns the ErrorDetail of a status error returned by a target's
// Deliver stream, or nil when it has none.
func Detail(err error) *logstorepb.ErrorDetail { return apierr.Detail(err) }

// IsPermanent reports whether err, received on a Deliver stream, says the
// target can never apply a committed delivery (APPLY_REJECTED, gRPC
// DATA_LOSS). The LogPlayer must not retry: see the package doc.
func IsPermanent(err error) bool {
	return status.Code(err) == codes.DataLoss
}

// IsFenced reports whether err says a LogPlayer with a higher epoch owns the
// target (STALE_EPOCH): this LogPlayer must stop delivering to it.
func IsFenced(err error) bool {
	d := Detail(err)
	return d != nil && d.Code == logstorepb.ErrorCode_STALE_EPOCH
}

// asRefusal returns err as a *refusal, or nil.
func asRefusal(err error) *refusal {
	var r *refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}
