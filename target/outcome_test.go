package target_test

import (
	"testing"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
)

// TestHelloTimeoutStatesNothingApplied: a Deliver stream that sends no
// Hello is refused with TIMEOUT after HelloTimeout. Nothing was delivered,
// so the refusal states APPLIED_NO on the wire (TIMEOUT's default is
// MAYBE: the outcome of a request in flight).
func TestHelloTimeoutStatesNothingApplied(t *testing.T) {
	store := &targettest.MemStore{}
	_, addr := targettest.Serve(t, target.Config{TargetID: "t1", Store: store, HelloTimeout: 100 * time.Millisecond})
	stream, err := targetpb.NewTargetClient(targettest.Dial(t, addr)).Deliver(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	d := apierr.Detail(err)
	if d == nil || d.Code != logstorepb.ErrorCode_UNKNOWN_OUTCOME {
		t.Fatalf("stream without a Hello ended with %v, want TIMEOUT", err)
	}
	if d.Applied != logstorepb.Applied_APPLIED_NO {
		t.Fatalf("hello timeout: detail %v states %v, want APPLIED_NO", d, d.Applied)
	}
	if n := len(store.Applied()); n != 0 {
		t.Fatalf("%d applied, want 0", n)
	}
}
