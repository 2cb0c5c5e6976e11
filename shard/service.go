package shard

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/types"
)

// service is the shardpb.Shard gRPC service of a Shard.
type service struct {
	shardpb.UnimplementedShardServer
	s *Shard
}

func (v *service) Get(_ context.Context, req *shardpb.GetRequest) (*shardpb.GetResponse, error) {
	if len(req.Key) == 0 {
		return nil, statusError(codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT, "empty key", nil)
	}
	value, found, lsn, err := v.s.Get(req.Key)
	if err != nil {
		return nil, statusError(codes.Internal, logstorepb.ErrorCode_INTERNAL, err.Error(), nil)
	}
	return &shardpb.GetResponse{Found: found, Value: value, AppliedLsn: uint64(lsn)}, nil
}

func (v *service) Scan(_ context.Context, req *shardpb.ScanRequest) (*shardpb.ScanResponse, error) {
	limit := int(req.Limit)
	switch {
	case limit == 0:
		limit = DefaultScanLimit
	case limit > MaxScanLimit:
		return nil, statusError(codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT,
			"scan limit above the maximum", &logstorepb.ErrorDetail{Limit: MaxScanLimit})
	}
	items, truncated, lsn, err := v.s.Scan(req.Prefix, limit)
	if err != nil {
		return nil, statusError(codes.Internal, logstorepb.ErrorCode_INTERNAL, err.Error(), nil)
	}
	return &shardpb.ScanResponse{Items: items, AppliedLsn: uint64(lsn), Truncated: truncated}, nil
}

func (v *service) WaitApplied(ctx context.Context, req *shardpb.WaitAppliedRequest) (*shardpb.WaitAppliedResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, v.s.cfg.WaitAppliedMax)
	defer cancel()
	lsn, err := v.s.WaitApplied(ctx, types.LSN(req.Lsn))
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, status.FromContextError(err).Err()
		}
		return nil, statusError(codes.DeadlineExceeded, logstorepb.ErrorCode_TIMEOUT,
			"applied lsn still below the requested lsn", nil)
	}
	return &shardpb.WaitAppliedResponse{AppliedLsn: uint64(lsn)}, nil
}

// statusError is a gRPC status carrying an ErrorDetail with code ec.
func statusError(c codes.Code, ec logstorepb.ErrorCode, msg string, d *logstorepb.ErrorDetail) error {
	if d == nil {
		d = &logstorepb.ErrorDetail{}
	}
	d.Code = ec
	st := status.New(c, "shard: "+msg)
	if withDetail, err := st.WithDetails(d); err == nil {
		return withDetail.Err()
	}
	return st.Err()
}
