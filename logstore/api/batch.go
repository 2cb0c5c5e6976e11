package api

import (
	"context"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// AppendBatch answers each request as Append would. Every valid request
// enters the intake, in request order, before the handler waits for any of
// them, so the aggregator can carry the whole call in one Raft entry. The
// call fails as a whole only before any request is looked at.
func (s *server) AppendBatch(ctx context.Context, req *logstorepb.AppendBatchRequest) (*logstorepb.AppendBatchResponse, error) {
	if err := ValidateBatch(req, s.cfg.MaxBatchCallBytes); err != nil {
		return nil, err
	}
	n := len(req.Requests)
	if err := s.authorizeProducers(ctx, req.Requests...); err != nil {
		return nil, err
	}
	leader, err := s.awaitCaughtUp(ctx)
	if err != nil {
		return nil, err
	}
	if !leader {
		return nil, s.notLeader()
	}
	s.metrics.appendBatchRequests.Observe(float64(n))
	start := time.Now()
	results := make([]*logstorepb.AppendResult, n)
	queued := make([]*pending, n)
	for i, r := range req.Requests {
		a, err := s.admitAppend(r, true)
		if err == nil && a.cmd == nil {
			results[i] = s.appendResult(a.answer, nil, start)
			continue
		}
		if err == nil {
			queued[i], err = s.agg.enqueue(a.cmd, a.size)
		}
		if err != nil {
			results[i] = s.appendResult(nil, s.submitErr(err), start)
		}
	}
	for i, p := range queued {
		if p == nil {
			continue
		}
		resp, err := s.agg.wait(ctx, p)
		results[i] = s.appendResult(resp, s.submitErr(err), start)
	}
	return &logstorepb.AppendBatchResponse{Results: results}, nil
}

// appendResult records one request's outcome in the append latency metric
// and wraps it for the response.
func (s *server) appendResult(resp any, err error, start time.Time) *logstorepb.AppendResult {
	s.metrics.appendAnswered(err, time.Since(start))
	if err != nil {
		return &logstorepb.AppendResult{Error: apierr.Encode(err)}
	}
	return &logstorepb.AppendResult{Response: resp.(*logstorepb.AppendResponse)}
}
