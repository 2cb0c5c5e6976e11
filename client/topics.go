package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// CreateTopic declares a topic or a topic pattern with a schema (see
// logstorepb.TopicDeclaration). Retried on unknown outcomes: declaring the
// same schema twice is harmless (Created is then false).
func (c *Client) CreateTopic(ctx context.Context, d *logstorepb.TopicDeclaration) (*logstorepb.CreateTopicResponse, error) {
	return callRPC(ctx, c, true, func(ctx context.Context, cc *grpc.ClientConn) (*logstorepb.CreateTopicResponse, error) {
		return logstorepb.NewLogStoreClient(cc).CreateTopic(ctx, &logstorepb.CreateTopicRequest{Declaration: d})
	})
}

// DescribeTopic returns topic as the leader knows it (its schema, the
// declaration it comes from, its offsets); NOT_FOUND (UNKNOWN_TOPIC) for a
// topic never written and not declared.
func (c *Client) DescribeTopic(ctx context.Context, topic string) (*logstorepb.TopicInfo, error) {
	resp, err := callRPC(ctx, c, true, func(ctx context.Context, cc *grpc.ClientConn) (*logstorepb.DescribeTopicResponse, error) {
		return logstorepb.NewLogStoreClient(cc).DescribeTopic(ctx, &logstorepb.DescribeTopicRequest{Topic: topic, Leader: true})
	})
	return resp.GetTopic(), err
}

// ListTopics returns one page of the leader's topics after pageToken
// (empty: the first page), at most limit (0: the server's default).
func (c *Client) ListTopics(ctx context.Context, pageToken string, limit uint32) (*logstorepb.ListTopicsResponse, error) {
	return callRPC(ctx, c, true, func(ctx context.Context, cc *grpc.ClientConn) (*logstorepb.ListTopicsResponse, error) {
		return logstorepb.NewLogStoreClient(cc).ListTopics(ctx, &logstorepb.ListTopicsRequest{PageToken: pageToken, Limit: limit, Leader: true})
	})
}

// EachTopic calls fn with every topic of the leader, page by page, in name
// order (a topic created while it runs may be missed), and returns the
// pattern declarations.
func (c *Client) EachTopic(ctx context.Context, fn func(*logstorepb.TopicInfo) error) ([]*logstorepb.TopicDeclaration, error) {
	var patterns []*logstorepb.TopicDeclaration
	token := ""
	for first := true; first || token != ""; first = false {
		resp, err := c.ListTopics(ctx, token, 0)
		if err != nil {
			return nil, err
		}
		if first {
			patterns = resp.Patterns
		}
		for _, t := range resp.Topics {
			if err := fn(t); err != nil {
				return nil, err
			}
		}
		token = resp.NextPageToken
	}
	return patterns, nil
}
