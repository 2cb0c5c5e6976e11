package client

import (
	"context"

	"github.com/logplayer/logplayer/types"
)

// CommittedOffset returns group's committed offset of topic (the next
// offset the group will read), or 0 when it never committed one. It asks
// the leader; a consumer that resumes from it should still commit with
// Txn.ExpectCommitted, which is checked against the replicated state.
func (c *Client) CommittedOffset(ctx context.Context, group, topic string) (types.Offset, error) {
	offs, err := c.FetchOffsets(ctx, group, topic)
	if err != nil {
		return 0, err
	}
	for _, o := range offs {
		if o.Topic == topic {
			return types.Offset(o.Offset), nil
		}
	}
	return 0, nil
}
