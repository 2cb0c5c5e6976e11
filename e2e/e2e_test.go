package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var (
	long   = flag.Bool("long", false, "run more fault rounds (see -rounds)")
	rounds = flag.Int("rounds", 0, "fault rounds (each kills a shard, the LogPlayer and the LogStore leader); 0: 1, or 5 with -long")
	seed   = flag.Uint64("seed", 0, "workload seed (0: random, printed)")
)

// acksPerPhase is how many more Appends must be acknowledged in each phase
// of a fault (while a process is down, after it returned): proof that
// writes go on, and enough traffic for the LogPlayer to have something to
// recover.
const acksPerPhase = 300

// TestRealProcessesUnderFaults runs the system as real processes under the
// demo workload and SIGKILLs, in each round, a shard, the LogPlayer and the
// LogStore leader, each restarted on its own data. Then it checks every
// guarantee of DESIGN.md §7 it can see from the outside (see the package
// doc).
func TestRealProcessesUnderFaults(t *testing.T) {
	n := *rounds
	if n == 0 {
		n = 1
		if *long {
			n = 5
		}
	}
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed %d), %d rounds", s, s, n)
	began := time.Now()
	binary(t)
	t.Logf("%v: binary built", since(began))

	c := startCluster(t)
	refusals := watchRefusals(t, c.shards)
	ld := startLoad(t, c.client, c.shards, s)
	c.waitAcked(ld, acksPerPhase)
	c.waitShardsApplied(ld.acks.max.Load())
	t.Logf("%v: cluster up, %d acknowledged", since(began), ld.acks.n.Load())

	for r := range n {
		victim := c.shards[r%len(c.shards)]
		c.killShard(ld, refusals, victim)
		t.Logf("%v: round %d: %s killed and back", since(began), r+1, victim.id)
		c.killPlayer(ld)
		t.Logf("%v: round %d: LogPlayer killed and back", since(began), r+1)
		c.killLeader(ld)
		t.Logf("%v: round %d: LogStore leader killed and back", since(began), r+1)
	}

	c.waitAcked(ld, acksPerPhase)
	verify(t, began, c.client, c.shards, ld, refusals, func() {
		for _, s := range c.shards {
			s.proc.terminate()
		}
	})
}

// waitAcked waits until n more Appends are acknowledged.
func (c *cluster) waitAcked(ld *load, n int64) {
	c.t.Helper()
	waitAcked(c.t, ld, n, c.alive)
}

// killShard SIGKILLs s under load, waits for more writes, restarts it on
// its data directory and waits until it caught up with the writes
// acknowledged meanwhile.
func (c *cluster) killShard(ld *load, w *refusalWatch, s *shardNode) {
	c.t.Helper()
	w.sample(s) // its counters die with it
	s.proc.kill()
	c.waitAcked(ld, acksPerPhase)
	s.proc.start()
	c.waitAcked(ld, acksPerPhase)
	c.waitShardsApplied(ld.acks.max.Load())
}

// killPlayer SIGKILLs the LogPlayer under load, waits for more writes (the
// LogStore does not need it), restarts it and waits until it took a new
// epoch and every shard caught up.
func (c *cluster) killPlayer(ld *load) {
	c.t.Helper()
	before := c.leaderStatus().Epoch
	c.player.kill()
	c.waitAcked(ld, acksPerPhase)
	c.player.start()
	c.waitFor(progressMax, "the restarted LogPlayer's new epoch", func() error {
		if e := c.leaderStatus().Epoch; e <= before {
			return fmt.Errorf("epoch %d, was %d before the restart", e, before)
		}
		return nil
	})
	c.waitAcked(ld, acksPerPhase)
	c.waitShardsApplied(ld.acks.max.Load())
}

// killLeader SIGKILLs the LogStore leader under load, waits until another
// node leads and writes go on, restarts the old leader on its data
// directory, waits until it follows and has applied what the leader had
// committed, and until every shard caught up (the LogPlayer's main stream
// may have read from the killed node).
func (c *cluster) killLeader(ld *load) {
	c.t.Helper()
	st := c.leaderStatus()
	old := c.store(st.NodeId)
	old.proc.kill()
	_, now := c.waitLeader(old.id)
	if now.RaftTerm <= st.RaftTerm {
		c.t.Fatalf("new leader %s in term %d, the killed one led term %d", now.NodeId, now.RaftTerm, st.RaftTerm)
	}
	c.waitAcked(ld, acksPerPhase)
	old.proc.start()
	commit := c.leaderStatus().CommitIndex
	c.waitFor(leaderWait, old.id+" to rejoin as a follower", func() error {
		s, err := c.status(old)
		if err != nil {
			return err
		}
		if s.Role != "follower" || s.AppliedIndex < commit {
			return fmt.Errorf("%s is %s, applied index %d, want follower at %d", old.id, s.Role, s.AppliedIndex, commit)
		}
		return nil
	})
	c.waitAcked(ld, acksPerPhase)
	c.waitShardsApplied(ld.acks.max.Load())
}
