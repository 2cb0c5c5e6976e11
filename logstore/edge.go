package logstore

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// AppendBatchRequestFactor is how many MaxRequestBytes one AppendBatch call
// may carry in all (each request stays within MaxRequestBytes).
const AppendBatchRequestFactor = 4

// maxBatchCallBytes bounds one encoded AppendBatchRequest.
func (c *Config) maxBatchCallBytes() int { return AppendBatchRequestFactor * c.MaxRequestBytes }

// maxRecvBytes is the gRPC server's receive limit: the largest call a
// client may send (an AppendBatch) plus slack, so every request up to it,
// a 5 MiB Append included, is answered by our own validation
// (REQUEST_TOO_LARGE with the limit) instead of gRPC's untyped
// RESOURCE_EXHAUSTED. Only a call above this still gets gRPC's error.
func (c *Config) maxRecvBytes() int { return c.maxBatchCallBytes() + grpcRecvSlack }

// validateBatchSize refuses an AppendBatch above maxBatchCallBytes as a
// whole: REQUEST_TOO_LARGE (INVALID_ARGUMENT) with the batch limit.
func validateBatchSize(req *logstorepb.AppendBatchRequest, limit int) error {
	if size := proto.Size(req); size > limit {
		return apierr.New(logstorepb.ErrorCode_REQUEST_TOO_LARGE,
			fmt.Sprintf("AppendBatch is %d bytes, limit %d (%d x the request limit); send fewer requests per call", size, limit, AppendBatchRequestFactor),
			func(d *logstorepb.ErrorDetail) { d.Limit = uint64(limit) })
	}
	return nil
}
