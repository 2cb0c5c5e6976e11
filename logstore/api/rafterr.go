package api

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The mapping of hashicorp/raft's errors to what a request did (apierr's
// sentinels, then its status in one place: apierr.Status).

// raftErr maps a failed Apply future to what its requests did (see
// raftSentinel); any other error came after the entry was handed to Raft,
// so it may have committed (ErrUnknownOutcome).
func raftErr(err error) error {
	if m, ok := raftSentinel(err); ok {
		return m
	}
	return apierr.ErrUnknownOutcome
}

// raftSentinel maps the errors hashicorp/raft resolves a future with
// (an aggregated entry's Apply, a membership change) to apierr's sentinels
// by whether the entry entered the log: ErrNotLeader and
// ErrLeadershipTransferInProgress (the leader loop refuses the entry
// before dispatching it) are ErrNotLeader, ErrEnqueueTimeout is
// ErrQueueFull: AppliedNo, safe to retry. ErrLeadershipLost and
// ErrRaftShutdown (the entry was dispatched, or may have been) are
// ErrUnknownOutcome: AppliedMaybe. false for any other error.
func raftSentinel(err error) (error, bool) {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return apierr.ErrNotLeader, true
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return apierr.ErrQueueFull, true
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return apierr.ErrUnknownOutcome, true
	}
	return nil, false
}

// MembershipErr maps a failed membership change the way an aggregated
// entry's Raft errors map (raftSentinel: leadership lost after the
// change was handed to Raft may have committed it); any other error is
// Raft's refusal of the change before it entered the log (MEMBERSHIP).
func MembershipErr(op string, err error) error {
	if m, ok := raftSentinel(err); ok {
		return apierr.Status(fmt.Errorf("%s: %v: %w", op, err, m))
	}
	return apierr.New(logstorepb.ErrorCode_MEMBERSHIP, fmt.Sprintf("%s: %v", op, err), nil)
}
