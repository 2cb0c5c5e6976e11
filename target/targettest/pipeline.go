package targettest

import (
	"context"
	"time"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// Pipeline sends batches on s keeping at most inflight of them unacked, and
// returns each batch's ack latency (from its Send to the first observed
// cumulative ack covering its last LSN), in batch order, and the time from
// the first Send to the last ack. Benchmarks use it.
func Pipeline(ctx context.Context, s *Sender, batches [][]*targetpb.Delivery, inflight int) ([]time.Duration, time.Duration, error) {
	last := func(i int) types.LSN { return types.LSN(batches[i][len(batches[i])-1].Lsn) }
	sentAt := make([]time.Time, len(batches))
	latencies := make([]time.Duration, 0, len(batches))
	acked := 0 // batches whose ack was observed
	// waitOne waits for the oldest unacked batch and records every batch the
	// cumulative ack now covers, up to sent.
	waitOne := func(sent int) error {
		if err := s.WaitAck(ctx, last(acked)); err != nil {
			return err
		}
		now := time.Now()
		for acked < sent && s.Acked() >= last(acked) {
			latencies = append(latencies, now.Sub(sentAt[acked]))
			acked++
		}
		return nil
	}
	start := time.Now()
	for i := range batches {
		for i-acked >= inflight {
			if err := waitOne(i); err != nil {
				return latencies, time.Since(start), err
			}
		}
		sentAt[i] = time.Now()
		if err := s.Send(batches[i]...); err != nil {
			return latencies, time.Since(start), err
		}
	}
	for acked < len(batches) {
		if err := waitOne(len(batches)); err != nil {
			return latencies, time.Since(start), err
		}
	}
	return latencies, time.Since(start), nil
}
