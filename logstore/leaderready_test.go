package logstore

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Raft reports this node leader a moment before watchLeadership opens the
// new leadership's gate: an Append arriving in between must wait for the
// gate, not be refused NOT_LEADER naming this very node as the leader
// (internal/serve TestStoreServesAPIHealthReflectionAndMetrics failed so
// once in CI: 'node n0 is not the leader (leader "n0" at "")').
func TestCaughtUpWaitsForTheGateWhileRaftLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCaughtUp()
		late := time.AfterFunc(20*time.Millisecond, func() { c.elected()() }) // watchLeadership is late
		defer late.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.wait(ctx, func() bool { return true }); err != nil {
			t.Fatalf("wait while Raft leads and the gate opens late: %v, want nil", err)
		}
	})
}

// A node Raft does not report leader is refused at once.
func TestCaughtUpRefusesAFollower(t *testing.T) {
	c := newCaughtUp()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.wait(ctx, func() bool { return false }); err == nil {
		t.Fatal("wait on a follower: nil, want ErrNotLeader")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a follower waited %v before its refusal", d)
	}
}
