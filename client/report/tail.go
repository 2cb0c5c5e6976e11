package report

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/storeconn"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// TailConfig is what logplayer tail reads: transactions by LSN, or with
// Topic one topic's messages by offset.
type TailConfig struct {
	// From and To are the LSNs of the first and last transaction (To 0:
	// the head at the start, or none with Follow); New starts after the
	// head instead of at From. Topics, if any, keep only their slices
	// and skip transactions without them.
	From, To uint64
	New      bool
	Topics   []string
	// Topic reads this topic from Offset instead of transactions;
	// WaitForTopic (with Follow) waits for a topic never written.
	Topic        string
	Offset       uint64
	WaitForTopic bool
	// Follow waits for new data until ctx ends; Limit stops after that
	// many lines (0: none).
	Follow bool
	Limit  uint64
	// Timeout bounds each question to the leader (its head, a topic's end).
	Timeout time.Duration
}

// Stopped is Tail's error when ctx ended while it read transactions: Err
// is the read's error as it is.
type Stopped struct{ Err error }

func (e *Stopped) Error() string { return e.Err.Error() }
func (e *Stopped) Unwrap() error { return e.Err }

// Tail passes cfg's lines to emit, a TxnLine per transaction or, with
// cfg.Topic, a TopicLine per message, and returns emit's error as it is.
// Without cfg.Follow it stops at the head (or the topic's end) the leader
// reports at the start. A topic never written is client.ErrUnknownTopic.
func Tail(ctx context.Context, cl *client.Client, cfg TailConfig, emit func(line any) error) error {
	if cfg.Topic != "" {
		return tailTopic(ctx, cl, cfg, emit)
	}
	from, to := cfg.From, cfg.To
	if cfg.New || (to == 0 && !cfg.Follow) {
		st, err := leaderStatus(ctx, cl, cfg.Timeout)
		if err != nil {
			return err
		}
		if cfg.New {
			from = st.HeadLsn + 1
		}
		if to == 0 && !cfg.Follow {
			to = st.HeadLsn
		}
	}
	if !cfg.Follow && to < from {
		return nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var printed uint64
	errLimit := errors.New("limit reached")
	err := cl.Read(rctx, &logstorepb.ReadRequest{FromLsn: from, ToLsn: to, Topics: cfg.Topics}, func(resp *logstorepb.ReadResponse) error {
		for _, t := range resp.Transactions {
			if err := emit(TxnOf(t)); err != nil {
				return err
			}
			printed++
			if cfg.Limit > 0 && printed >= cfg.Limit {
				return errLimit
			}
		}
		return nil
	})
	if errors.Is(err, errLimit) {
		return nil
	}
	if err != nil && ctx.Err() != nil {
		return &Stopped{Err: err}
	}
	return err
}

// leaderStatus asks the leader for its status within timeout.
func leaderStatus(ctx context.Context, cl *client.Client, timeout time.Duration) (*logstorepb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return cl.LeaderStatus(ctx)
}

// tailTopic reads one topic by offset (client.TopicReader: any node,
// resuming elsewhere after a failure). Without Follow it stops at the
// topic's end as the leader sees it at the start.
func tailTopic(ctx context.Context, cl *client.Client, cfg TailConfig, emit func(line any) error) error {
	limit := cfg.Limit
	if !cfg.Follow {
		end, err := topicEnd(ctx, cl, cfg.Topic, cfg.Timeout)
		if err != nil {
			return err
		}
		if end <= cfg.Offset {
			return nil
		}
		if limit == 0 || end-cfg.Offset < limit {
			limit = end - cfg.Offset
		}
	}
	r, err := cl.NewTopicReader(client.TopicReaderConfig{Topic: cfg.Topic, FromOffset: types.Offset(cfg.Offset), Limit: limit, WaitForTopic: cfg.WaitForTopic})
	if err != nil {
		return err
	}
	defer r.Close()
	return storeconn.Drain(ctx, r.Next, nil, func(m *client.TopicMessage) error {
		return emit(TopicMessageOf(cfg.Topic, m))
	})
}

// topicEnd is the topic's next offset as the leader sees it
// (DescribeTopic: Status lists only the first topics).
func topicEnd(ctx context.Context, cl *client.Client, topic string, timeout time.Duration) (uint64, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	info, err := cl.DescribeTopic(dctx, topic)
	cancel()
	switch {
	case err == nil:
		return info.NextOffset, nil
	case status.Code(err) == codes.Unimplemented: // a leader older than DescribeTopic: its Status lists every topic
		st, err := leaderStatus(ctx, cl, timeout)
		if err != nil {
			return 0, err
		}
		for _, t := range st.Topics {
			if t.Topic == topic {
				return t.NextOffset, nil
			}
		}
		return 0, fmt.Errorf("%w: %w", client.ErrUnknownTopic, apierr.UnknownTopic(topic))
	case apierr.CodeOf(err) == logstorepb.ErrorCode_UNKNOWN_TOPIC:
		return 0, fmt.Errorf("%w: %w", client.ErrUnknownTopic, err)
	}
	return 0, err
}
