package devcluster_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestDevRefusesMalformedShardMessage is issue #12 defect 3 as a new user
// met it: an Append of the bytes "hi" to shard-0 was accepted, and the
// shard then blocked on it for good. The dev cluster declares its shard
// topics kv, so the Append is refused (INVALID_ARGUMENT) and nothing is
// written: a later valid write to shard-0 is still delivered.
func TestDevRefusesMalformedShardMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := startPlain(t, ctx)
	before, err := c.Client.LeaderStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: "shard-0", Messages: []*logstorepb.Message{{Value: []byte("hi")}}},
	}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Append of \"hi\" to shard-0: %v, want INVALID_ARGUMENT (the shard cannot apply it)", err)
	}
	after, err := c.Client.LeaderStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.HeadLsn != before.HeadLsn {
		t.Fatalf("head moved from %d to %d: the refused Append was written", before.HeadLsn, after.HeadLsn)
	}
	appendAndWaitAck(t, ctx, c, "shard-0", "v") // shard-0 is not blocked
}
