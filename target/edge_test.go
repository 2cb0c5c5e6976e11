package target_test

import (
	"testing"

	"github.com/logplayer/logplayer/internal/grpcedge/edgetest"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
)

// TestMalformedDeliver: bytes that are not a DeliverRequest end the
// Deliver stream with INVALID_ARGUMENT and an ErrorDetail, not gRPC's
// INTERNAL, and apply nothing.
func TestMalformedDeliver(t *testing.T) {
	store := &targettest.MemStore{}
	_, addr := targettest.Serve(t, target.Config{TargetID: "t1", Store: store})
	cc := edgetest.Conn(t, addr)
	edgetest.WantInvalid(t, "Deliver", edgetest.Stream(ctxT(t), cc, targetpb.Target_Deliver_FullMethodName, edgetest.Garbage))
	if n := len(store.Applied()); n != 0 {
		t.Fatalf("%d applied, want 0", n)
	}
}
