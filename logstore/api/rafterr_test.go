package api

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/apierr"
)

// A failed Apply future's error is classified by whether the entry could
// have entered the log: a leadership transfer in progress refuses the
// Apply before it is dispatched, so a retry is safe (NotApplied), not an
// unknown outcome.
func TestRaftErrClassesByWhetherTheEntryEnteredTheLog(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want apierr.Outcome
	}{
		{raft.ErrNotLeader, apierr.NotApplied},
		{raft.ErrEnqueueTimeout, apierr.NotApplied},
		{raft.ErrLeadershipTransferInProgress, apierr.NotApplied},
		{raft.ErrLeadershipLost, apierr.MaybeApplied},
		{raft.ErrRaftShutdown, apierr.MaybeApplied},
	} {
		if got := apierr.Classify(apierr.Status(raftErr(tc.err))); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A membership change (AddVoter, RemoveServer) whose Raft future fails with
// ErrLeadershipLost was handed to Raft: its configuration entry may have
// committed, the same as an aggregated command's. Only a refusal before
// the entry entered the log (ErrNotLeader) says it was not applied.
func TestMembershipRaftErrSaysWhetherTheChangeMayHaveApplied(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want apierr.Outcome
	}{
		{raft.ErrNotLeader, apierr.NotApplied},
		{raft.ErrLeadershipLost, apierr.MaybeApplied},
		{raft.ErrRaftShutdown, apierr.MaybeApplied},
	} {
		if got := apierr.Classify(MembershipErr("add voter n4", tc.err)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}
