package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
)

var (
	duration  = flag.Duration("duration", 0, "TestNemesis: how long faults are injected per seed (0: the CI mode, nemesisCIDuration per seed)")
	headReads = flag.Bool("head-reads", false, "TestNemesis: also record reads to the head (the leader's Status head_lsn taken as the log's head when it answered; Status is not documented as linearizable)")
	plaintext = flag.Bool("nemesis-plaintext", false, "TestNemesis: run the system without TLS and tokens (the default is the production configuration: TLS on every connection, bearer tokens and a policy, as `logplayer dev`)")
	artifact  = flag.String("artifact-dir", "", "TestNemesis: directory for the linearizability visualization of a violation (default: the test's temporary directory, kept only on failure by -test.v output)")
)

// The CI mode: a fixed set of seeds plus one random one (printed), each
// with faults for nemesisCIDuration.
var nemesisCISeeds = []uint64{1, 2}

const nemesisCIDuration = 25 * time.Second

// Fault timing: each fault lasts a random time in [faultMin, faultMax],
// with a random pause in [gapMin, gapMax] before the next.
const (
	faultMin = 500 * time.Millisecond
	faultMax = 6 * time.Second
	gapMin   = 200 * time.Millisecond
	gapMax   = 3 * time.Second
)

// clockJumpMax bounds a clock jump either way: below the producer table's
// idle expiry (logstore.DefaultProducerIdleExpiry, 24 h of log time) and
// the retention age (7 days), which a larger forward jump would reach by
// design (see the README).
const clockJumpMax = 6 * time.Hour

// livenessMax bounds the time every target takes to apply the log's head
// once the faults stopped and the load ended.
const livenessMax = 90 * time.Second

// linearizableTimeout bounds the porcupine search.
const linearizableTimeout = 2 * time.Minute

// nemesisReaders is how many goroutines read ranges of the log while the
// faults run (their reads go into the history).
const nemesisReaders = 2

// readRangeMax is the longest range a reader asks for.
const readRangeMax = 8

// A run with faults longer than soakFrom (the soak) paces its history, so
// that the linearizability check of the whole run stays within memory and
// minutes: at most one Append every soakAppendEvery (for all producers
// together) and one read every soakReadEvery per reader. The CI mode is not
// paced.
const (
	soakFrom        = 5 * time.Minute
	soakAppendEvery = 10 * time.Millisecond
	soakReadEvery   = 100 * time.Millisecond
)

// TestNemesis runs the system as real processes (3 LogStore nodes, a
// LogPlayer, 3 shards) behind TCP proxies under the demo workload while a
// nemesis, driven by one seed, injects random faults: SIGKILL and
// SIGSTOP/SIGCONT of any process (the LogStore leader in particular), two
// store nodes killed at once (quorum lost, then back), partitions of the
// Raft network (the leader isolated, any node split from the other two),
// a target cut from the LogPlayer only, and the leader's clock jumping
// forward or back. Then every fault is healed and it checks liveness
// (every target applies the head within livenessMax), linearizability of
// the recorded history (checkLinearizable), exactly once
// (ackViolations, targetViolations, and the checks of verify), and that
// log timestamps never decrease.
//
// The system runs with TLS, bearer tokens and a policy, as in production
// (-nemesis-plaintext: without). Recorded calls have short deadlines and a
// prober appends without a producer id (nemesis_probe_test.go), so the
// history holds unknown outcomes; the summary counts appends by outcome.
//
// go test ./e2e -run Nemesis: the CI mode (nemesisCISeeds and one random
// seed, nemesisCIDuration each); -seed N runs only seed N; -duration D
// sets the fault time (the soak: -duration 30m, one random seed unless
// -seed is given). Every fault is printed with its time; a failure prints
// the command that replays the seed's schedule. TestNemesisNetns (-tags
// netns) is the same on network namespaces.
func TestNemesis(t *testing.T) {
	runSeeds(t, "TestNemesis", "", func(t *testing.T) faultNet { return newProxyNet(t) })
}

// runSeeds runs the seeds the flags ask for (see TestNemesis) on the
// network newNet makes; test and tags name the test in the replay command.
func runSeeds(t *testing.T, test, tags string, newNet func(t *testing.T) faultNet) {
	d := *duration
	var seeds []uint64
	switch {
	case *seed != 0:
		seeds = []uint64{*seed}
	case d != 0: // a soak: one random seed
		seeds = []uint64{rand.Uint64()}
	default: // the CI mode
		seeds = append(slices.Clone(nemesisCISeeds), rand.Uint64())
		d = nemesisCIDuration
	}
	t.Logf("seeds %v, %v of faults each; %s", seeds, d, securityMode())
	for _, s := range seeds {
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					var extra string
					if tags != "" {
						extra = " -tags " + tags
					}
					if *plaintext {
						extra += " -nemesis-plaintext"
					}
					t.Logf("replay: go test%s ./e2e -count=1 -run '%s$' -seed %d -duration %v -v", extra, test, s, d)
				}
			}()
			runNemesis(t, s, d, newNet)
		})
	}
}

// nemesisCluster is the cluster on a faultNet (the network the nemesis
// can cut) with a clock offset file per store node.
type nemesisCluster struct {
	*cluster
	net faultNet
	// clocks[i] is the file node i reads its clock offset from.
	clocks []string
	// sink is the SQL sink (`logplayer sink sqlite`, nemesisSinkTables),
	// a target of the LogPlayer beside the shards.
	sink *sinkEnv
}

// nemesisSinkTables are the SQL sink's topics in the nemesis: the demo
// workload's orders and inventory (JSON values), one table each.
var nemesisSinkTables = []sinkTable{{demo.OrdersTopic, demo.OrdersTopic}, {demo.InventoryTopic, demo.InventoryTopic}}

// faultNet is the network of a nemesis run: where each process listens
// and dials, and how a link is cut. proxyNet (in-test TCP proxies) is the
// default; netnsNet (-tags netns) runs each store node and the LogPlayer in
// its own network namespace and drops packets.
type faultNet interface {
	// name describes the network for the logs.
	name() string
	// store is store node i's API, Raft and metrics address, as the test,
	// the LogPlayer and (Raft) the other nodes reach it; peerRaft is the
	// Raft address node i is given for node j.
	store(i int) (api, raft, metrics string)
	peerRaft(i, j int) string
	// shard is where shard i listens (its API, reached by the test) and
	// target where the LogPlayer reaches it.
	shard(i int) (addr, target string)
	// player is the LogPlayer's admin and metrics address.
	player() (admin, metrics string)
	// sink is where the SQL sink listens and where the LogPlayer reaches
	// it (called once).
	sink() (addr, target string)
	// wrap is the command prefix of store node i's process (i < 0: the
	// LogPlayer's); nil: none.
	wrap(i int) []string
	// hosts are extra names the certificates must carry (nil: 127.0.0.1
	// and localhost only).
	hosts() []string
	// isolate cuts (or heals) every Raft link to and from node i; cutTarget
	// the LogPlayer's link to shard i only.
	isolate(i int, cut bool)
	cutTarget(i int, cut bool)
}

// proxyNet is the default faultNet: everything on 127.0.0.1, a TCP proxy
// on every Raft link and every LogPlayer-to-shard link.
type proxyNet struct {
	t      testing.TB
	stores [][3]string // api, raft, metrics
	shards [][2]string // addr, proxy address
	// raftLinks[i][j] carries node i's Raft connections to node j (nil
	// for i == j): node i is given it as j's Raft address.
	raftLinks [][]*proxy
	// targetLinks[i] carries the LogPlayer's connections to shard i.
	targetLinks []*proxy
}

func newProxyNet(t testing.TB) *proxyNet {
	pn := &proxyNet{t: t}
	for range storeNodes {
		pn.stores = append(pn.stores, [3]string{freeAddr(t), freeAddr(t), freeAddr(t)})
	}
	pn.raftLinks = make([][]*proxy, storeNodes)
	for i := range storeNodes {
		pn.raftLinks[i] = make([]*proxy, storeNodes)
		for j := range storeNodes {
			if i != j {
				pn.raftLinks[i][j] = newProxy(t, fmt.Sprintf("n%d->n%d", i+1, j+1), pn.stores[j][1])
			}
		}
	}
	for i := range shardCount {
		addr := freeAddr(t)
		pn.targetLinks = append(pn.targetLinks, newProxy(t, "player->"+demo.ShardTopic(i), addr))
		pn.shards = append(pn.shards, [2]string{addr, pn.targetLinks[i].addr})
	}
	return pn
}

func (pn *proxyNet) name() string { return "in-test TCP proxies on 127.0.0.1" }
func (pn *proxyNet) store(i int) (string, string, string) {
	return pn.stores[i][0], pn.stores[i][1], pn.stores[i][2]
}
func (pn *proxyNet) peerRaft(i, j int) string {
	if i == j {
		return pn.stores[i][1]
	}
	return pn.raftLinks[i][j].addr
}
func (pn *proxyNet) shard(i int) (string, string) { return pn.shards[i][0], pn.shards[i][1] }
func (pn *proxyNet) player() (string, string)     { return freeAddr(pn.t), freeAddr(pn.t) }
func (pn *proxyNet) sink() (string, string) {
	addr := freeAddr(pn.t)
	return addr, addr
}
func (pn *proxyNet) wrap(int) []string { return nil }
func (pn *proxyNet) hosts() []string   { return nil }

func (pn *proxyNet) isolate(i int, cut bool) {
	for j := range storeNodes {
		if j == i {
			continue
		}
		for _, p := range []*proxy{pn.raftLinks[i][j], pn.raftLinks[j][i]} {
			if cut {
				p.cut()
			} else {
				p.heal()
			}
		}
	}
}

func (pn *proxyNet) cutTarget(i int, cut bool) {
	if cut {
		pn.targetLinks[i].cut()
	} else {
		pn.targetLinks[i].heal()
	}
}

// startNemesisCluster starts the system as startCluster does, on fn, with
// the nemesis build of the binary.
func startNemesisCluster(t *testing.T, fn faultNet) *nemesisCluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), phaseAcks: processPhaseAcks}
	if !*plaintext {
		c.tls = writeTLSTokens(t, filepath.Join(c.dir, "tls"), fn.hosts())
	}
	nc := &nemesisCluster{cluster: c, net: fn}
	for i := range storeNodes {
		n := &storeNode{id: fmt.Sprintf("n%d", i+1)}
		n.api, n.raft, n.metrics = fn.store(i)
		c.stores = append(c.stores, n)
		nc.clocks = append(nc.clocks, filepath.Join(c.dir, n.id+".clock"))
	}
	for i, n := range c.stores {
		args := []string{"store", "--id", n.id, "--data-dir", filepath.Join(c.dir, n.id),
			"--raft-addr", n.raft, "--api-addr", n.api, "--metrics-addr", n.metrics,
			"--heartbeat-timeout", raftHeartbeat.String(), "--election-timeout", raftElection.String()}
		for j, p := range c.stores {
			args = append(args, "--peer", fmt.Sprintf("%s=%s/%s", p.id, fn.peerRaft(i, j), p.api))
		}
		if c.tls != nil {
			args = append(args, c.tls.args(n.id)...)
		}
		if err := os.WriteFile(nc.clocks[i], nil, 0o644); err != nil {
			t.Fatal(err)
		}
		n.proc = newProc(t, c.dir, n.id, args...)
		n.proc.bin, n.proc.env = nemesisBuild, []string{"LOGPLAYER_NEMESIS_CLOCK_FILE=" + nc.clocks[i]}
		n.proc.wrap = fn.wrap(i)
		n.proc.start()
	}
	c.connect()

	args := c.playerArgs()
	for i := range shardCount {
		addr, target := fn.shard(i)
		s := c.addShardAt(i, nemesisBuild, addr)
		args = append(args, "--target", fmt.Sprintf("%s=%s/%s", s.id, target, s.id))
	}
	sinkAddr, sinkTarget := fn.sink()
	nc.sink = &sinkEnv{t: t, c: c, lite: filepath.Join(c.dir, "sink.db"), addr: sinkAddr, tables: nemesisSinkTables}
	nc.sink.sink = nc.sink.newSink("sink", sinkAddr)
	nc.sink.sink.bin = nemesisBuild
	nc.sink.sink.start()
	c.sinks = append(c.sinks, nc.sink.sink)
	args = append(args, "--target", nc.sink.targetSpec(sinkTarget))
	c.admin, c.playerMetrics = fn.player()
	args = append(args, "--admin-addr", c.admin, "--metrics-addr", c.playerMetrics)
	c.player = newProc(t, c.dir, "player", args...)
	c.player.bin, c.player.wrap = nemesisBuild, fn.wrap(-1)
	c.player.start()
	return nc
}

// setClock sets store node i's clock offset (0: the real clock).
func (nc *nemesisCluster) setClock(i int, offset time.Duration) {
	nc.t.Helper()
	if err := os.WriteFile(nc.clocks[i], []byte(offset.String()), 0o644); err != nil {
		nc.t.Fatal(err)
	}
}

// Fault kinds.
const (
	faultKillStore    = "kill-store"
	faultKillLeader   = "kill-leader"
	faultPauseStore   = "pause-store"
	faultPauseLeader  = "pause-leader"
	faultQuorumLoss   = "kill-two-stores"
	faultKillPlayer   = "kill-player"
	faultPausePlayer  = "pause-player"
	faultKillShard    = "kill-shard"
	faultPauseShard   = "pause-shard"
	faultKillSink     = "kill-sink"
	faultPauseSink    = "pause-sink"
	faultIsolateLead  = "isolate-leader"
	faultSplit        = "split-one-two"
	faultCutTarget    = "cut-target-from-player"
	faultClockForward = "leader-clock-forward"
	faultClockBack    = "leader-clock-back"
)

// faultKinds are drawn with equal probability.
var faultKinds = []string{
	faultKillStore, faultKillLeader, faultPauseStore, faultPauseLeader, faultQuorumLoss,
	faultKillPlayer, faultPausePlayer, faultKillShard, faultPauseShard, faultKillSink, faultPauseSink,
	faultIsolateLead, faultSplit, faultCutTarget, faultClockForward, faultClockBack,
}

// nemesis draws faults from one seed and applies them to nc, one at a
// time.
type nemesis struct {
	nc       *nemesisCluster
	rng      *rand.Rand
	began    time.Time
	refusals *refusalWatch
	counts   map[string]int
	// inFlight counts the recorded Appends in flight: each cut says how
	// many it interrupted.
	inFlight *inFlight
}

// dur draws a duration in [lo, hi].
func (n *nemesis) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// leaderIndex is the current leader's index, or a node drawn at random
// when no leader answers quickly (an election in progress).
func (n *nemesis) leaderIndex() int {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	fallback := n.rng.IntN(storeNodes) // drawn either way: the schedule stays the seed's
	st, err := n.nc.client.LeaderStatus(ctx)
	if err != nil {
		return fallback
	}
	for i, s := range n.nc.stores {
		if s.id == st.NodeId {
			return i
		}
	}
	return fallback
}

// storeFor is the store node a fault of kind hits: the leader for the
// kinds aimed at it, else other (drawn from the seed).
func (n *nemesis) storeFor(kind string, other int) int {
	switch kind {
	case faultKillLeader, faultPauseLeader, faultIsolateLead:
		return n.leaderIndex()
	}
	return other
}

// step applies one fault for its duration and heals it.
func (n *nemesis) step(k int) {
	nc, t := n.nc, n.nc.t
	kind := faultKinds[n.rng.IntN(len(faultKinds))]
	hold := n.dur(faultMin, faultMax)
	other := n.rng.IntN(storeNodes)   // a store node, for the kinds that pick any
	second := n.rng.IntN(storeNodes)  // the second node of a quorum loss
	shardIx := n.rng.IntN(shardCount) // a shard, for the kinds on targets
	jump := n.dur(time.Minute, clockJumpMax)
	n.counts[kind]++
	logf := func(format string, args ...any) {
		t.Logf("%v: fault %d %s: %s (%d recorded appends in flight)", since(n.began), k, kind, fmt.Sprintf(format, args...), n.inFlight.now())
	}
	switch kind {
	case faultKillStore, faultKillLeader:
		s := nc.stores[n.storeFor(kind, other)]
		logf("SIGKILL %s for %v", s.id, hold)
		s.proc.kill()
		keep(hold)
		s.proc.start()
	case faultPauseStore, faultPauseLeader:
		s := nc.stores[n.storeFor(kind, other)]
		logf("SIGSTOP %s for %v", s.id, hold)
		s.proc.signal(syscall.SIGSTOP)
		keep(hold)
		s.proc.signal(syscall.SIGCONT)
	case faultQuorumLoss:
		i := n.leaderIndex()
		j := second
		if j == i {
			j = (i + 1) % storeNodes
		}
		a, b := nc.stores[i], nc.stores[j]
		logf("SIGKILL %s (leader) and %s for %v", a.id, b.id, hold)
		a.proc.kill()
		b.proc.kill()
		keep(hold)
		a.proc.start()
		b.proc.start()
	case faultKillPlayer:
		logf("SIGKILL the LogPlayer for %v", hold)
		nc.player.kill()
		keep(hold)
		nc.player.start()
	case faultPausePlayer:
		logf("SIGSTOP the LogPlayer for %v", hold)
		nc.player.signal(syscall.SIGSTOP)
		keep(hold)
		nc.player.signal(syscall.SIGCONT)
	case faultKillShard:
		s := nc.shards[shardIx]
		logf("SIGKILL %s for %v", s.id, hold)
		n.refusals.kill(s, s.proc.kill)
		keep(hold)
		s.proc.start()
	case faultPauseShard:
		s := nc.shards[shardIx]
		logf("SIGSTOP %s for %v", s.id, hold)
		s.proc.signal(syscall.SIGSTOP)
		keep(hold)
		s.proc.signal(syscall.SIGCONT)
	case faultKillSink:
		logf("SIGKILL the SQL sink for %v", hold)
		nc.sink.sink.kill()
		keep(hold)
		nc.sink.sink.start()
	case faultPauseSink:
		logf("SIGSTOP the SQL sink for %v", hold)
		nc.sink.sink.signal(syscall.SIGSTOP)
		keep(hold)
		nc.sink.sink.signal(syscall.SIGCONT)
	case faultIsolateLead, faultSplit:
		i := n.storeFor(kind, other)
		logf("Raft links of %s cut from the other two nodes for %v", nc.stores[i].id, hold)
		nc.net.isolate(i, true)
		keep(hold)
		nc.net.isolate(i, false)
	case faultCutTarget:
		s := nc.shards[shardIx]
		logf("LogPlayer -> %s cut for %v (the test still reaches it)", s.id, hold)
		nc.net.cutTarget(shardIx, true)
		keep(hold)
		nc.net.cutTarget(shardIx, false)
	case faultClockForward, faultClockBack:
		i := n.leaderIndex()
		if kind == faultClockBack {
			jump = -jump
		}
		logf("%s's clock jumps %v for %v, then back", nc.stores[i].id, jump, hold)
		nc.setClock(i, jump)
		keep(hold)
		nc.setClock(i, 0)
	}
	if err := nc.alive(); err != nil {
		t.Fatal(err)
	}
}

// keep lets d pass: how long a fault lasts, or the quiet between two (a
// duration the seed chose, not a wait for a condition).
func keep(d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	<-tm.C
}

// runNemesis is one seed's run: start, faults for d, heal, checks.
func runNemesis(t *testing.T, s uint64, d time.Duration, newNet func(t *testing.T) faultNet) {
	began := time.Now()
	nemesisBuild.get(t)
	t.Logf("%v: binary built", since(began))
	fn := newNet(t)
	t.Logf("network: %s; %s", fn.name(), securityMode())
	nc := startNemesisCluster(t, fn)
	c := nc.cluster
	// A target the LogPlayer gave up on (a pause or a cut) keeps that
	// stream until the new one supersedes it: refused as superseded.
	refusals := watchRefusals(t, c.shards, "superseded")
	hist := newHistRecorder()
	var appendEvery, readEvery time.Duration
	if d > soakFrom {
		appendEvery, readEvery = soakAppendEvery, soakReadEvery
		t.Logf("soak: at most one append every %v, one read every %v per reader", appendEvery, readEvery)
	}
	dl, fl := newDeadlines(s), &inFlight{}
	app := newHistAppender(c.client, hist, appendEvery, dl, fl)
	defer app.stop()
	ld := startLoad(t, app, c.shards, s)
	readers := startReaders(c, hist, readEvery)
	defer readers.stop()
	probeEv := probeEvery
	if d > soakFrom {
		probeEv = probeSoakEvery
	}
	probes := startProber(c, hist, dl, fl, probeEv)
	defer probes.stop()
	c.waitAcked(ld)
	t.Logf("%v: cluster up, %d acknowledged; seed %d, faults for %v", since(began), ld.acks.n.Load(), s, d)

	n := &nemesis{nc: nc, rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)), began: began, refusals: refusals, counts: map[string]int{}, inFlight: fl}
	faultsBegan := time.Now()
	k := 0
	for time.Since(faultsBegan) < d {
		k++
		n.step(k)
		gap := n.dur(gapMin, gapMax)
		keep(gap)
	}
	t.Logf("%v: faults stopped after %d: %s", since(began), k, n.summary())

	// Every process is running again and every link healed (each fault
	// heals itself). Writes must go on, then every target reach the head.
	c.waitAcked(ld)
	readers.stop()
	probes.stop()
	res, err := ld.stop()
	if err != nil {
		t.Fatalf("workload: %v", err)
	}
	// A recorded call given up at its short deadline may still be in the
	// leader's intake (or a healed link's buffers) and commit after the
	// load stopped: take the head once it stopped moving, so the checks
	// below see the whole log.
	head := c.waitHeadStable(headQuiet, livenessMax)
	caught := time.Now()
	c.waitFor(livenessMax, fmt.Sprintf("every target to apply the head lsn %d (liveness bound %v)", head, livenessMax), func() error {
		for _, s := range c.shards {
			if _, err := s.applied(head); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("%v: liveness: every target applied the head lsn %d %v after the load stopped (bound %v); %d retries",
		since(began), head, time.Since(caught).Round(time.Millisecond), livenessMax, res.Retries)
	// The SQL sink: its tables hold exactly the log's orders and inventory
	// messages, each once, at its offset.
	nc.sink.check("the nemesis")

	var next map[string]map[string]uint64
	var states map[string]map[string][]byte
	var applied map[string]uint64
	verify(t, began, c, ld, refusals, func() {
		for _, s := range c.shards {
			s.proc.terminate()
		}
		next, states, applied = readShards(t, c.shards)
	})
	for _, p := range c.allProcs() {
		p.checkLog()
	}
	oc := checkHistory(t, c, hist, head, next, states, applied)
	t.Logf("%v: seed %d (%s): %d faults (%s), %d operations recorded: %s", since(began), s, securityMode(), k, n.summary(), len(hist.Ops()), oc)
}

// headQuiet is how long the leader's head must stay put after the load
// stopped before the checks take it: above the longest recorded call
// deadline (2 s), so no call given up by its client commits later.
const headQuiet = 3 * time.Second

// waitHeadStable returns the leader's head LSN once it has not moved for
// quiet, failing the test after limit.
func (c *cluster) waitHeadStable(quiet, limit time.Duration) uint64 {
	c.t.Helper()
	head, since := c.leaderStatus().HeadLsn, time.Now()
	c.waitFor(limit, fmt.Sprintf("the leader's head lsn to stay put for %v", quiet), func() error {
		if h := c.leaderStatus().HeadLsn; h != head {
			head, since = h, time.Now()
		}
		if time.Since(since) < quiet {
			return fmt.Errorf("head lsn %d, unchanged for %v", head, time.Since(since).Round(time.Millisecond))
		}
		return nil
	})
	return head
}

// summary lists the fault counts by kind.
func (n *nemesis) summary() string {
	var out []string
	for _, k := range faultKinds {
		if c := n.counts[k]; c > 0 {
			out = append(out, fmt.Sprintf("%s=%d", k, c))
		}
	}
	return strings.Join(out, " ")
}

// readShards reads each stopped shard's durable state.
func readShards(t *testing.T, shards []*shardNode) (next map[string]map[string]uint64, states map[string]map[string][]byte, applied map[string]uint64) {
	next, states, applied = map[string]map[string]uint64{}, map[string]map[string][]byte{}, map[string]uint64{}
	for _, s := range shards {
		data, st, err := shard.ReadDir(s.dir)
		if err != nil {
			t.Errorf("%s: %v", s.id, err)
			continue
		}
		next[s.id] = map[string]uint64{}
		for topic, off := range st.Topics {
			next[s.id][topic] = uint64(off)
		}
		states[s.id], applied[s.id] = data, uint64(st.AppliedLSN)
	}
	return next, states, applied
}

// checkHistory reads the log [1, head] back and runs the history
// checkers: linearizability of the recorded appends and reads (unknown
// outcomes settled by the log), exactly once at every target (its durable
// state, next offsets and applied LSN against the log replayed), and log
// timestamps that never decrease (leader clocks jumped).
func checkHistory(t *testing.T, c *cluster, hist *histRecorder, head uint64,
	next map[string]map[string]uint64, states map[string]map[string][]byte, applied map[string]uint64) outcomeCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	var log []*logstorepb.Transaction
	if err := demo.ReadLog(ctx, c.client, 1, head, func(tx *logstorepb.Transaction) error {
		log = append(log, tx)
		return nil
	}); err != nil {
		t.Fatalf("read log: %v", err)
	}
	final := make([]histTxn, 0, len(log))
	for i, tx := range log {
		final = append(final, histTxnOf(tx, logTxnID))
		if i > 0 && tx.TimestampUnixNano < log[i-1].TimestampUnixNano {
			t.Errorf("lsn %d: leader timestamp %d below lsn %d's %d", tx.Lsn, tx.TimestampUnixNano, log[i-1].Lsn, log[i-1].TimestampUnixNano)
		}
	}
	raw := hist.Ops()
	ops := resolveUnknown(oneEffectPerID(slices.Clone(raw)), final)
	oc := countOutcomes(raw, ops)
	t.Logf("outcomes: %s", oc)
	vis := filepath.Join(t.TempDir(), "linearizability.html")
	if *artifact != "" {
		vis = filepath.Join(*artifact, strings.NewReplacer("/", "_", "=", "-").Replace(t.Name())+"-linearizability.html")
	}
	rep, err := checkLinearizable(ops, linearizableConfig{Timeout: linearizableTimeout, Visualization: vis})
	if err != nil {
		t.Errorf("linearizability: %v", err)
		for _, line := range explain(ops, final) {
			t.Log(line)
		}
		dumpHistory(t, strings.TrimSuffix(vis, ".html")+".json", ops, final)
	}
	t.Logf("linearizability: %s", rep)
	if rep.Reads == 0 || rep.Appends == 0 {
		t.Errorf("history of %d appends and %d reads: the workload or the readers recorded nothing", rep.Appends, rep.Reads)
	}

	var targets []histTarget
	for _, s := range c.shards {
		if states[s.id] == nil {
			continue // readShards reported it
		}
		targets = append(targets, histTarget{ID: s.id, Topics: []string{s.id}, AppliedLSN: applied[s.id],
			NextOffsets: next[s.id], State: states[s.id]})
	}
	for id, v := range targetViolations(log, shard.ModelApply, targets) {
		if !v.OK() {
			t.Errorf("target %s: %d exactly-once violations:\n%s", id, v.Count, strings.Join(v.List, "\n"))
		}
	}
	t.Logf("checked %d transactions of the log, %d targets", len(log), len(targets))
	return oc
}

// securityMode names how the system runs (-nemesis-plaintext).
func securityMode() string {
	if *plaintext {
		return "plaintext"
	}
	return "TLS, tokens and a policy"
}

// logTxnID names a transaction read from the log as the workload did its
// Append (the key of its orders message).
func logTxnID(t *logstorepb.Transaction) string { return txnID(t.Slices) }

// oneEffectPerID gives the appends of one transaction id (attempts of one
// idempotent-producer sequence: the workload's retries, and the client's
// own retries inside one Append call) exactly one op that may have written
// it, as the producer table promises (ackViolations checks no id is in the
// log twice): the acknowledged attempt that was not answered as a duplicate;
// without one, the earliest called among the unknown and the
// duplicate-answered ones (the write happened after that call and before
// any duplicate answer). Every other unknown attempt had no effect of its
// own and becomes Failed. An op that is the writer and was answered as a
// duplicate (the client retried inside the call: its first try wrote) is
// no longer marked Duplicate. Without this, resolveUnknown would settle
// every unknown attempt at the transaction's LSN and the model would
// refuse the second write, and it would refuse a duplicate answer with no
// other op to have written first.
func oneEffectPerID(ops []histOp) []histOp {
	slices.SortStableFunc(ops, func(a, b histOp) int { return cmp.Compare(a.Call, b.Call) })
	writer := map[string]int{} // id -> index of the op that wrote it
	for i, op := range ops {
		if op.Kind == opAppend && op.Outcome == outcomeOK && !op.Duplicate {
			writer[op.ID] = i
		}
	}
	for i, op := range ops {
		if op.Kind != opAppend || !(op.Outcome == outcomeUnknown || op.Duplicate) {
			continue
		}
		if _, ok := writer[op.ID]; !ok {
			writer[op.ID] = i // the earliest called: ops are in call order
		}
	}
	for i := range ops {
		op := &ops[i]
		if op.Kind != opAppend {
			continue
		}
		w, ok := writer[op.ID]
		switch {
		case !ok:
		case w == i && op.Duplicate:
			op.Duplicate = false
		case w != i && op.Outcome == outcomeUnknown:
			op.Outcome = outcomeFailed
		}
	}
	return ops
}

// histAppender records every Append of the workload in a history; each
// call in flight holds one client slot (porcupine's client id: a slot's
// operations never overlap).
type histAppender struct {
	inner demo.Appender
	rec   *histRecorder
	pace  *time.Ticker // nil: not paced
	dl    *deadlines   // each call's own deadline
	fl    *inFlight
	mu    struct {
		sync.Mutex
		busy []bool
	}
}

// newHistAppender records inner's appends in rec; every > 0 paces them
// (one per tick, for all callers together).
func newHistAppender(inner demo.Appender, rec *histRecorder, every time.Duration, dl *deadlines, fl *inFlight) *histAppender {
	h := &histAppender{inner: inner, rec: rec, dl: dl, fl: fl}
	if every > 0 {
		h.pace = time.NewTicker(every)
	}
	return h
}

// stop releases the pacing ticker.
func (h *histAppender) stop() {
	if h.pace != nil {
		h.pace.Stop()
	}
}

func (h *histAppender) slot() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, b := range h.mu.busy {
		if !b {
			h.mu.busy[i] = true
			return i
		}
	}
	h.mu.busy = append(h.mu.busy, true)
	return len(h.mu.busy) - 1
}

func (h *histAppender) free(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.busy[i] = false
}

// InitProducer implements demo.Appender (not recorded: the history is of
// Appends).
func (h *histAppender) InitProducer(ctx context.Context, name string) (string, uint64, error) {
	return h.inner.InitProducer(ctx, name)
}

// Append implements demo.Appender.
func (h *histAppender) Append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	if h.pace != nil {
		select {
		case <-h.pace.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	slot := h.slot()
	defer h.free(slot)
	ctx, cancel := context.WithTimeout(ctx, h.dl.next())
	defer cancel()
	h.fl.enter()
	call := h.rec.Now()
	resp, err := h.inner.Append(ctx, req)
	h.fl.leave()
	h.rec.Append(slot, txnID(req.Slices), req, call, resp, err)
	return resp, err
}

// readers read ranges near the head while the faults run: the leader's
// head, then [head-k, head] from whichever node the client picks. A read
// that fails tells nothing and is not recorded. Reader r is client
// readerClient0+r of the history.
type readers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// readerClient0 is the first reader's client id (the appenders' slots are
// below it).
const readerClient0 = 1000

// startReaders starts the readers; every > 0 paces each to one read per
// tick.
func startReaders(c *cluster, hist *histRecorder, every time.Duration) *readers {
	ctx, cancel := context.WithCancel(context.Background())
	r := &readers{cancel: cancel}
	for i := range nemesisReaders {
		r.wg.Go(func() {
			var tick <-chan time.Time
			if every > 0 {
				tk := time.NewTicker(every)
				defer tk.Stop()
				tick = tk.C
			}
			for k := 0; ctx.Err() == nil; k++ {
				readOnce(ctx, c, hist, readerClient0+i, uint64(k%readRangeMax))
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
					}
				}
			}
		})
	}
	return r
}

// readOnce records one read of up to back+1 transactions ending at the
// leader's head.
func readOnce(ctx context.Context, c *cluster, hist *histRecorder, client int, back uint64) {
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	call := hist.Now()
	st, err := c.client.LeaderStatus(ctx)
	statusDone := hist.Now()
	if err != nil || st.HeadLsn == 0 {
		if ctx.Err() == nil && err != nil {
			<-ctx.Done() // no leader: wait out the timeout rather than spin
		}
		return
	}
	from := max(1, st.HeadLsn-min(back, st.HeadLsn-1))
	var txns []histTxn
	err = c.client.Read(ctx, &logstorepb.ReadRequest{FromLsn: from, ToLsn: st.HeadLsn}, func(r *logstorepb.ReadResponse) error {
		for _, tx := range r.Transactions {
			txns = append(txns, histTxnOf(tx, logTxnID))
		}
		return nil
	})
	if err != nil || len(txns) == 0 {
		return
	}
	if *headReads && txns[len(txns)-1].LSN == st.HeadLsn && back%2 == 0 {
		// The head as the leader said it: the read is placed within the
		// Status call (the transactions it names are immutable).
		hist.Add(histOp{Client: client, Kind: opRead, Call: call, Return: statusDone,
			From: from, To: st.HeadLsn, ToHead: true, Txns: txns})
		return
	}
	hist.Read(client, from, from+uint64(len(txns))-1, false, call, txns)
}

// stop ends the readers (idempotent).
func (r *readers) stop() {
	r.once.Do(func() {
		r.cancel()
		r.wg.Wait()
	})
}

// explainMax bounds the lines explain returns.
const explainMax = 20

// explain looks for the plain reasons a history fails the linearizability
// check, to print next to porcupine's visualization: a read that returned
// something else than the final log holds, an acknowledged append whose
// LSN or offsets differ from the log's, an append acknowledged at a lower
// LSN invoked only after one at a higher LSN returned, and a read that
// returned an LSN before its append was invoked.
func explain(ops []histOp, log []histTxn) []string {
	var out []string
	add := func(format string, args ...any) {
		if len(out) < explainMax {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	appendAt := map[uint64]histOp{}
	for _, op := range ops {
		if op.Kind == opAppend && op.Outcome == outcomeOK && !op.Resolved && !op.Duplicate {
			if op.LSN > uint64(len(log)) || log[op.LSN-1].ID != op.ID {
				add("append %s acknowledged at lsn %d: not there in the log", op.ID, op.LSN)
				continue
			}
			if !sameSlices(op.Slices, log[op.LSN-1].Slices) {
				add("append %s at lsn %d: acknowledged slices %v, the log's %v", op.ID, op.LSN, op.Slices, log[op.LSN-1].Slices)
			}
			appendAt[op.LSN] = op
		}
	}
	// Acknowledged at dense LSNs, the appends must take effect in LSN
	// order: the one at lsn x no earlier than every call at or below x
	// (callsUpTo[x]), and before it returned; a read that returned lsn x
	// must have returned after callsUpTo[x].
	callsUpTo := make([]int64, len(log)+1)
	for l := uint64(1); l <= uint64(len(log)); l++ {
		callsUpTo[l] = callsUpTo[l-1]
		if a, ok := appendAt[l]; ok {
			callsUpTo[l] = max(callsUpTo[l], a.Call)
			if callsUpTo[l] > a.Return {
				add("append %s at lsn %d returned at %d, before an append at a lower lsn was invoked at %d", a.ID, l, a.Return, callsUpTo[l])
			}
		}
	}
	for _, op := range ops {
		if op.Kind != opRead {
			continue
		}
		for _, tx := range op.Txns {
			if tx.LSN > uint64(len(log)) || log[tx.LSN-1].ID != tx.ID || !sameSlices(tx.Slices, log[tx.LSN-1].Slices) {
				add("read by client %d at [%d, %d] returned %+v at lsn %d, the log holds something else", op.Client, op.Call, op.Return, tx, tx.LSN)
			}
			if tx.LSN <= uint64(len(log)) && callsUpTo[tx.LSN] > op.Return {
				add("read by client %d returned lsn %d at %d, before an append at or below it was invoked at %d", op.Client, tx.LSN, op.Return, callsUpTo[tx.LSN])
			}
		}
	}
	return out
}

// sameSlices compares two transactions' slices in topic order.
func sameSlices(a, b []histSlice) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, byTopic)
	slices.SortFunc(b, byTopic)
	return sameSortedSlices(a, b)
}

// dumpHistory writes the checked history and the final log as JSON next
// to the visualization, to check again offline.
func dumpHistory(t *testing.T, path string, ops []histOp, log []histTxn) {
	b, err := json.Marshal(struct {
		Ops []histOp
		Log []histTxn
	}{ops, log})
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Errorf("history dump: %v", err)
		return
	}
	t.Logf("history: %s", path)
}
