package shard_test

import (
	"testing"

	"github.com/logplayer/logplayer/internal/grpcedge/edgetest"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
)

// TestMalformedRequests: bytes that are not a valid request answer
// INVALID_ARGUMENT with an ErrorDetail on the shard's unary API and on its
// Deliver stream, and change nothing.
func TestMalformedRequests(t *testing.T) {
	r := start(t, shard.Config{Dir: t.TempDir(), ID: "shard-1"})
	cc := edgetest.Conn(t, r.addr)
	edgetest.WantInvalid(t, "WaitApplied", edgetest.Unary(ctxT(t), cc, shardpb.Shard_WaitApplied_FullMethodName, edgetest.Garbage))
	edgetest.WantInvalid(t, "Deliver", edgetest.Stream(ctxT(t), cc, targetpb.Target_Deliver_FullMethodName, edgetest.Garbage))
	if lsn := r.sh.AppliedLSN(); lsn != 0 {
		t.Fatalf("applied %d, want 0", lsn)
	}
}
