package devcluster

import (
	"context"
	"fmt"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// ShardTopicPattern is the topic pattern the dev cluster declares with the
// kv schema: every shard-N topic takes only valid shard mutations, so a
// malformed message is refused by the LogStore instead of blocking the
// shard (issue #12 defect 3).
const ShardTopicPattern = "shard-*"

// declareRetryEvery is how often declareTopics asks again while the new
// cluster's version is not yet committed (the leader polls the voters'
// versions once at election, then every second).
const declareRetryEvery = 100 * time.Millisecond

// declareTopics declares the dev cluster's topics: the shard topics kv. A
// new cluster refuses CreateTopic (FEATURE_NOT_ENABLED) until its leader
// commits the cluster version every node supports; it waits for that, up
// to ctx's deadline.
func (c *Cluster) declareTopics(ctx context.Context) error {
	d := &logstorepb.TopicDeclaration{Pattern: ShardTopicPattern, Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_KV}
	for {
		_, err := c.Client.CreateTopic(ctx, d)
		if apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
			if err != nil {
				return fmt.Errorf("declaring %s as kv: %w", ShardTopicPattern, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("declaring %s as kv: %w (last: %v)", ShardTopicPattern, ctx.Err(), err)
		case <-time.After(declareRetryEvery):
		}
	}
}
