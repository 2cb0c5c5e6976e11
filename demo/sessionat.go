package demo

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/shardpb"
)

// SessionAt connects to the shards (target id -> address) with dial, runs
// Session with them as cfg.Shards and closes the connections; what
// `logplayer demo` and `logplayer dev --demo` run.
func SessionAt(ctx context.Context, cfg SessionConfig, shards map[string]string, dial func(addr string) (*grpc.ClientConn, error)) (*Report, error) {
	cfg.Shards = map[string]shardpb.ShardClient{}
	for id, addr := range shards {
		cc, err := dial(addr)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", id, err)
		}
		defer cc.Close()
		cfg.Shards[id] = shardpb.NewShardClient(cc)
	}
	return Session(ctx, cfg)
}
