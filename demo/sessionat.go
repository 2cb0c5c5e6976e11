package demo

import (
	"context"
	"errors"
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

// CheckShardAddrs checks the shards given to SessionAt: shard-0 ..
// shard-N-1 with N >= 2, the workload's topics (ShardTopic).
func CheckShardAddrs(shards map[string]string) error {
	if len(shards) < 2 {
		return errors.New("give at least 2 shards (--shard shard-0=... --shard shard-1=...)")
	}
	for i := range len(shards) {
		if _, ok := shards[ShardTopic(i)]; !ok {
			return fmt.Errorf("shards must be named shard-0 .. shard-%d: %s is missing", len(shards)-1, ShardTopic(i))
		}
	}
	return nil
}
