package logstore

import (
	"sync"

	"github.com/hashicorp/raft"
)

// stableGuard is the stable store (term, vote) as Raft sees it. Raft
// panics when a stable-store write fails, and hashicorp/raft handles a
// heartbeat on the transport's connection goroutine after checking that it
// is not shut down: a heartbeat with a newer term racing Node.Close could
// so write the term after the store was closed and panic the process
// ("failed to save current term"). seal, called by Close before the
// stores close, waits for writes in progress and drops every later one:
// the node is stopping, and a term adopted (never a vote: votes are
// written by Raft's main goroutine, stopped by then) but not persisted is
// only forgotten, as if the heartbeat had come a moment later.
type stableGuard struct {
	raft.StableStore
	mu     sync.RWMutex
	sealed bool
}

func (g *stableGuard) Set(key []byte, val []byte) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.sealed {
		return nil
	}
	return g.StableStore.Set(key, val)
}

func (g *stableGuard) SetUint64(key []byte, val uint64) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.sealed {
		return nil
	}
	return g.StableStore.SetUint64(key, val)
}

// seal drops every write from now on, once those in progress are done.
func (g *stableGuard) seal() {
	g.mu.Lock()
	g.sealed = true
	g.mu.Unlock()
}
