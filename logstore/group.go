package logstore

import "time"

// PlayerGroup service (issue #13): the target registry and the LogPlayer
// group membership. Writes are Raft commands (fsm/group.go) submitted by
// the leader (a follower answers NOT_LEADER naming the leader, like every
// write); List and Describe read the node's applied state. The service
// is the edge's (logstore/api/group.go); its bounds are configuration.

const (
	// DefaultGroupLease is a member's lease in log time. 3 s: a player
	// renews every lease/3 (1 s), so two lost or slow renewals (a Raft
	// commit under load, a GC pause) do not cost it its targets, while a
	// dead player's targets move within 2x the lease (issue #13's bound):
	// the lease ends at most 3 s after its last renewal and the next entry
	// (another member's renewal, at most 1 s later) applies the expiry.
	// Stamped by the leader into every entry (ApplyLimits), so every
	// replica expires a lease at the same log time whatever its own
	// configuration.
	DefaultGroupLease = 3 * time.Second
	// MaxRegisteredTargets bounds the target registry (stamped like
	// MaxConsumers; each target also takes a consumer row).
	MaxRegisteredTargets = 10000
)
