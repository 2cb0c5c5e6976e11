package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

var (
	long   = flag.Bool("long", false, "run more fault rounds (see -rounds)")
	rounds = flag.Int("rounds", 0, "fault rounds; 0: each test's default (TestRealProcessesUnderFaults: 1, or 5 with -long; TestPlayerGroupUnderFaults: 2, or 6)")
	seed   = flag.Uint64("seed", 0, "workload seed (0: random, printed)")
)

// TestRealProcessesUnderFaults runs the system as real processes under the
// demo workload. Each round, under load: SIGKILL a shard (restarted on its
// data); SIGSTOP another until the LogPlayer suspends it, then SIGCONT;
// SIGKILL the LogPlayer (restarted: new epoch); SIGSTOP it, start a second
// LogPlayer, SIGCONT the first (a zombie, fenced by epoch); SIGKILL the
// third shard and the LogPlayer, restart the LogPlayer without it, then the
// shard; SIGKILL the LogStore leader (restarted on its data). Every component must come
// back and catch up before the next fault. Then it checks every guarantee of
// docs/DESIGN.md, "Guarantees", it can see from the outside (see the package doc).
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
	// A paused shard keeps the stream the LogPlayer gave up on until the
	// LogPlayer's new stream supersedes it: refused with reason superseded,
	// the target doing its job.
	refusals := watchRefusals(t, c.shards, "superseded")
	ld := startLoad(t, c.client, c.shards, s)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	t.Logf("%v: cluster up, %d acknowledged", since(began), ld.acks.n.Load())

	for r := range n {
		victim := c.shards[r%len(c.shards)]
		c.killShard(ld, refusals, victim)
		t.Logf("%v: round %d: %s killed and back", since(began), r+1, victim.id)
		paused := c.shards[(r+1)%len(c.shards)]
		c.pauseShard(ld, paused)
		t.Logf("%v: round %d: %s paused until suspended, resumed and caught up", since(began), r+1, paused.id)
		c.killPlayer(ld)
		t.Logf("%v: round %d: LogPlayer killed and back", since(began), r+1)
		c.zombiePlayer(ld, refusals, r)
		t.Logf("%v: round %d: a second LogPlayer fenced off the paused first one", since(began), r+1)
		absent := c.shards[(r+2)%len(c.shards)]
		c.killPlayerWhileShardDown(ld, refusals, absent)
		t.Logf("%v: round %d: LogPlayer restarted while %s was down, both back", since(began), r+1, absent.id)
		c.killLeader(ld)
		t.Logf("%v: round %d: LogStore leader killed and back", since(began), r+1)
	}

	c.waitAcked(ld)
	verify(t, began, c, ld, refusals, func() {
		for _, s := range c.shards {
			s.proc.terminate()
		}
	})
	for _, p := range c.allProcs() {
		p.checkLog()
	}
}

// killShard SIGKILLs s under load, waits for more writes, restarts it on
// its data directory and waits until it caught up with the writes
// acknowledged meanwhile.
func (c *cluster) killShard(ld *load, w *refusalWatch, s *shardNode) {
	c.t.Helper()
	w.kill(s, s.proc.kill)
	c.waitAcked(ld)
	s.proc.start()
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
}

// pauseShard SIGSTOPs s under load until the LogPlayer suspends it (its
// stream went silent: keepalive, or its queue overflowed), then SIGCONTs it
// and waits until it returned and caught up. The stopped process still
// holds its stream and the batches in flight: they reach it after the
// LogPlayer gave up on them.
func (c *cluster) pauseShard(ld *load, s *shardNode) {
	c.t.Helper()
	label := fmt.Sprintf("target=%q", s.id)
	suspends := c.mustPlayerMetric("logplayer_target_suspends_total", label)
	returns := c.mustPlayerMetric("logplayer_target_returns_total", label)
	s.proc.signal(syscall.SIGSTOP)
	c.waitAcked(ld)
	c.waitPlayerMetric(silentMax, "logplayer_target_suspends_total", label, suspends)
	s.proc.signal(syscall.SIGCONT)
	c.waitPlayerMetric(progressMax, "logplayer_target_returns_total", label, returns)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
}

// killPlayerWhileShardDown SIGKILLs s, then the LogPlayer, and restarts the
// LogPlayer while s is still down (its start handshake misses s), then s.
func (c *cluster) killPlayerWhileShardDown(ld *load, w *refusalWatch, s *shardNode) {
	c.t.Helper()
	w.kill(s, s.proc.kill)
	c.waitAcked(ld)
	before := c.leaderStatus().Epoch
	c.player.kill()
	c.player.start()
	c.waitNewEpoch(before)
	c.waitAcked(ld)
	s.proc.start()
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
}

// zombiePlayer SIGSTOPs the LogPlayer and starts a second one (a new
// epoch) while the first still holds its streams and batches in flight;
// then it resumes the first, a zombie that still believes it delivers, and
// lets it run under load before killing it (it may stop by itself once it
// learns it was fenced). Every target must take over to the new epoch by
// refusing the zombie's stream (stale_epoch, the only refusal allowed
// meanwhile), and nothing of the zombie may be applied (the final checks).
func (c *cluster) zombiePlayer(ld *load, w *refusalWatch, round int) {
	c.t.Helper()
	zombie := c.player
	before := c.leaderStatus().Epoch
	fenced := w.allowDuring("stale_epoch", func() {
		zombie.signal(syscall.SIGSTOP)
		c.newPlayer(fmt.Sprintf("player-r%d", round+1)).start()
		c.waitNewEpoch(before)
		c.waitAcked(ld)
		zombie.signal(syscall.SIGCONT)
		c.waitAcked(ld)
		c.waitAcked(ld)
		if zombie.exited() {
			c.t.Logf("the zombie LogPlayer stopped by itself; its log ends:\n%s", tail(zombie.log, 3))
		}
		zombie.kill()
	})
	for _, s := range c.shards {
		if fenced[s.id] < 1 {
			c.t.Errorf("%s counted %v stale_epoch refusals while a second LogPlayer took over, want at least 1", s.id, fenced[s.id])
		}
	}
	c.waitTargetsApplied(ld.acks.max.Load())
}

// killPlayer SIGKILLs the LogPlayer under load, waits for more writes (the
// LogStore does not need it), restarts it and waits until it took a new
// epoch and every shard caught up.
func (c *cluster) killPlayer(ld *load) {
	c.t.Helper()
	before := c.leaderStatus().Epoch
	c.player.kill()
	c.waitAcked(ld)
	c.player.start()
	c.waitNewEpoch(before)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
}

// killLeader SIGKILLs the LogStore leader under load, waits until another
// node leads and writes go on, restarts the old leader on its data
// directory, waits until it follows and has applied what the leader had
// committed, and until every shard caught up (the LogPlayer's main stream
// may have read from the killed node).
func (c *cluster) killLeader(ld *load) {
	c.t.Helper()
	st, old := c.leader()
	old.proc.kill()
	c.waitNewLeader(old, st)
	c.waitAcked(ld)
	old.proc.start()
	c.waitRejoined(old)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
}
