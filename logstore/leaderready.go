package logstore

import (
	"context"
	"sync"
	"time"

	"github.com/logplayer/logplayer/apierr"
)

// caughtUp tells the edge when a new leader's state holds every entry
// committed before its term. A node restarted from a snapshot (or a
// follower that was behind) re-applies the log only once it leads and
// commits; until then its state lacks producer rows that committed, and
// the edge would take a retry for a new request (and validate it, issue
// #26). watchLeadership opens a new gate on election, closes it once a
// Raft barrier (every earlier entry applied) returns, and ends it when
// leadership is lost.
type caughtUp struct {
	mu struct {
		sync.Mutex
		ready chan struct{} // closed once the barrier returned
		lost  chan struct{} // closed when this leadership ends
	}
}

func newCaughtUp() *caughtUp {
	c := &caughtUp{}
	c.mu.ready, c.mu.lost = make(chan struct{}), make(chan struct{})
	close(c.mu.lost) // not leading
	return c
}

// elected opens a gate for a new leadership and returns the function that
// marks it caught up.
func (c *caughtUp) elected() (ready func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, l := make(chan struct{}), make(chan struct{})
	c.mu.ready, c.mu.lost = r, l
	var once sync.Once
	return func() { once.Do(func() { close(r) }) }
}

// deposed ends the current leadership's gate.
func (c *caughtUp) deposed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.mu.lost:
	default:
		close(c.mu.lost)
	}
}

// gateLag bounds how long wait trusts Raft's word that this node leads
// while the gate still says it does not: Raft's state changes a moment
// before watchLeadership, told through LeaderCh, opens the new
// leadership's gate.
const gateLag = time.Second

// wait returns nil once the current leadership caught up,
// apierr.ErrNotLeader when it ended (or never began) first, and the
// context's error when ctx ends first. When the gate says "not leading"
// but leading (Raft's own state) says it leads, the gate is late: wait
// polls for it up to gateLag rather than refuse NOT_LEADER while naming
// this node as the leader.
func (c *caughtUp) wait(ctx context.Context, leading func() bool) error {
	// deadline is set before the first blocking wait, not on entry: a
	// leader that caught up (every Append but its first few) reads no clock.
	var deadline time.Time
	for {
		c.mu.Lock()
		ready, lost := c.mu.ready, c.mu.lost
		c.mu.Unlock()
		select {
		case <-ready:
			return nil
		default:
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(gateLag)
		}
		select {
		case <-ready:
			return nil
		case <-lost:
			if !leading() || time.Now().After(deadline) {
				return apierr.ErrNotLeader
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
