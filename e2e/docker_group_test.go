//go:build docker

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The LogPlayer group in containers (issue #13): a member cut off from the
// LogStore but not from its targets.
const (
	dockerGroupName = "e2e"
	// dockerFailoverMax bounds the wait for the cut member's targets to
	// stream from the other member (issue #13: within 2x the 3 s lease; the
	// wait is generous for a loaded machine, the time is printed).
	dockerFailoverMax = 60 * time.Second
	// Messages the test reads in the JSON logs (packages target and
	// logplayer).
	streamOpenLog  = "stream open"
	streamCloseLog = "stream closed"
	leaseLapsedLog = "group lease lapsed: stopped delivering to every target until renewed"
)

// dockerMembers are the group's members (container alias = --id).
var dockerMembers = []string{"player-1", "player-2"}

// TestDockerPlayerGroupPartition runs a LogPlayer group of 2 members in
// containers (FROM scratch, the static binary) on two private networks: a
// "store" network with the 3 store nodes and a "targets" network with the 3
// shards; each member is on both. The targets are registered in the
// LogStore by the test (an admin call). Under load, the member owning the
// most targets is disconnected from the store network only: it keeps
// reaching its targets, but cannot renew its lease. It must stop
// delivering on its own (its lease lapses locally before the LogStore ends
// the lease and hands its targets over with new tokens), and the targets
// must never apply anything from it after the new owner's Hello:
//
//   - the cut member's target streams stay up until its lease lapses
//     (logged), and the lapse comes before the new owner's
//     "stream open" (with the new token as its epoch) in each moved
//     target's log, and no moved target logs a stream of the old token
//     taken over by the new one (that would mean the old stream was still
//     open when the new owner started: the token fencing, not the lease,
//     stopped it);
//   - the shards' refusal counters show no refusal but stale_epoch (a
//     stream with an older token, refused: counted during the partition
//     and the rejoin, and printed); a batch of the old token applied after the new
//     owner's Hello would break the continuity of the new owner's stream
//     (a refusal of another reason) or the shards' final state;
//   - after the cut member is reconnected it renews, rejoins and takes its
//     share of the targets back (new tokens again), and at the end every
//     shard holds exactly the log's messages for its topic (the model
//     check of TestDockerPartition, durable state included).
//
// Failover times are printed: cut to the lapse, to the reassignment in the
// LogStore, to the new owner's streams open.
func TestDockerPlayerGroupPartition(t *testing.T) {
	s := dockerSeed(t)
	began := time.Now()

	g := startDockerGroup(t)
	d, c := g.d, g.c
	t.Logf("%v: image built, containers up", since(began))
	// stale_epoch, allowed all along: a stream of an older token refused,
	// at a join, the failover and the rejoin (counted per phase below; a
	// scrape that fails at the end of a phase would see it later).
	refusals := watchRefusals(t, c.shards, "stale_epoch")
	var before map[string]*logstorepb.Assignment
	refusals.allowDuring("stale_epoch", func() { // the second member's join moves a target
		before = g.waitBalanced()
	})
	ld := startLoad(t, c.client, c.shards, s)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	t.Logf("%v: group balanced %s, %d acknowledged", since(began), ownersText(before), ld.acks.n.Load())

	cut, other := g.busiest(before)
	var moved []string
	for id, a := range before {
		if a.MemberId == cut {
			moved = append(moved, id)
		}
	}
	slices.Sort(moved)
	stale := refusals.allowDuring("stale_epoch", func() {
		cutAt := time.Now()
		d.docker("network", "disconnect", d.network, d.name(cut))
		var after map[string]*logstorepb.Assignment
		c.waitFor(dockerFailoverMax, fmt.Sprintf("%v to move from %s to %s", moved, cut, other), func() error {
			var err error
			after, err = g.assignments()
			if err != nil {
				return err
			}
			for _, id := range moved {
				if a := after[id]; a.MemberId != other || a.Token <= before[id].Token {
					return fmt.Errorf("%s owned by %q token %d (was %s, token %d)", id, a.MemberId, a.Token, cut, before[id].Token)
				}
			}
			return nil
		})
		reassigned := time.Since(cutAt)
		var opened map[string]time.Time
		c.waitFor(dockerFailoverMax, "the new owner's streams to open", func() error {
			var err error
			opened, err = g.newStreamsOpen(moved, before, after, other, cutAt)
			return err
		})
		lapsed := g.checkStoppedFirst(cut, moved, before, opened, cutAt)
		last := time.Duration(0)
		for _, at := range opened {
			last = max(last, at.Sub(cutAt))
		}
		t.Logf("%v: FAILOVER %s cut from the LogStore (owning %v): lease lapsed locally after %v, "+
			"targets reassigned in the LogStore after %v (measured from the host), new owner's streams open after %v (lease %v)",
			since(began), cut, moved, lapsed.Sub(cutAt).Round(time.Millisecond), reassigned.Round(time.Millisecond),
			last.Round(time.Millisecond), g.lease())
		c.waitAcked(ld)
		c.waitTargetsApplied(ld.acks.max.Load())
		t.Logf("%v: %s delivers %v, shards caught up", since(began), other, moved)

		d.docker("network", "connect", "--ip", d.ips[cut], "--alias", cut, d.network, d.name(cut))
		rejoinAt := time.Now()
		back := g.waitBalanced()
		t.Logf("%v: %s reconnected, rejoined after %v: %s", since(began), cut, time.Since(rejoinAt).Round(time.Millisecond), ownersText(back))
		c.waitAcked(ld)
		c.waitTargetsApplied(ld.acks.max.Load())
	})
	t.Logf("stale_epoch refusals during the partition and the rejoin: %v", stale)

	c.waitAcked(ld)
	g.verify(began, ld, refusals)
}

// verify is verify (check_test.go) for a group: the same checks of the
// acknowledged Appends, the log and the shards (live, then durable), every
// member's metrics, and each shard's durable epoch against its last
// fencing token (a single LogPlayer's targets all hold the cluster's
// epoch). The shards' files are copied out of their stopped containers.
func (g *dockerGroup) verify(began time.Time, ld *load, w *refusalWatch) {
	t, c, d := g.t, g.c, g.d
	res, err := ld.stop()
	if err != nil {
		t.Fatalf("workload: %v", err)
	}
	acks := ld.acks.acks()
	t.Logf("%v: load stopped: %d acknowledged, %d retries", since(began), len(acks), res.Retries)
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	st, err := c.client.LeaderStatus(ctx)
	if err != nil {
		t.Fatalf("leader status: %v", err)
	}
	head := st.HeadLsn
	if m := ld.acks.max.Load(); head < m {
		t.Fatalf("leader's head lsn %d below the highest acknowledged lsn %d", head, m)
	}
	facts, err := readLog(ctx, c.client, head)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	checkAcks(t, facts, acks)
	checkDelivery(ctx, t, c.client, c.shards, ld.rec, res, head)
	ld.stopWatching()
	bad, allowed, scrapes, err := w.close()
	if err != nil {
		t.Error(err)
	}
	if len(bad) > 0 {
		t.Errorf("targets refused deliveries:\n%s", strings.Join(bad, "\n"))
	}
	t.Logf("refusal counters: %d scrapes; refusals the faults allowed: %v", scrapes, allowed)
	for _, m := range dockerMembers {
		info, err := checkPlayerMetrics(g.metrics[m])
		if err != nil {
			t.Errorf("%s: %v", m, err)
		}
		t.Logf("%s:\n%s", m, strings.Join(info, "\n"))
	}
	final, err := g.assignments()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range c.shards {
		d.docker("stop", "-t", "10", d.name(sh.id))
		sh.dir = t.TempDir()
		d.docker("cp", d.name(sh.id)+":/data/.", sh.dir)
	}
	checkDurable(t, c.shards, facts, head, func(id string) (uint64, string) { return final[id].Token, "its last fencing token" })
	t.Logf("%v: checked %d transactions, %d acknowledged (head lsn %d, tokens %s)", since(began), head, len(acks), head, ownersText(final))
}

// dockerGroup is the system of TestDockerPlayerGroupPartition: d.network is
// the store network, targets the targets network.
type dockerGroup struct {
	t       *testing.T
	d       *dockerSystem
	c       *cluster
	targets string
	metrics map[string]string // member -> its /metrics as the host reaches it
}

// startDockerGroup starts the stores (store network), the shards (targets
// network), registers the shards as targets and starts the members (both
// networks; the targets network first, so a member's name and published
// metrics port stay there when it is cut from the store network).
func startDockerGroup(t *testing.T) *dockerGroup {
	d := newDockerSystem(t)
	g := &dockerGroup{t: t, d: d, targets: d.prefix + "-targets", metrics: map[string]string{}}
	d.more = append(d.more, g.targets) // removed by teardown
	storeIP := d.newNetwork(d.network)
	targetIP := d.newNetwork(g.targets)
	targetIPs := map[string]string{}
	for _, a := range []string{"store1", "store2", "store3"} {
		d.ips[a], storeIP = storeIP.String(), storeIP.Next()
	}
	for _, a := range append([]string{"shard0", "shard1", "shard2"}, dockerMembers...) {
		targetIPs[a], targetIP = targetIP.String(), targetIP.Next()
	}
	for _, a := range dockerMembers {
		d.ips[a], storeIP = storeIP.String(), storeIP.Next()
	}

	c := &cluster{t: t, dir: t.TempDir(), crashed: d.crashed, phaseAcks: dockerPhaseAcks}
	g.c = c
	d.startStores(c, slices.Clone(dockerMembers))
	for i := range shardCount {
		s := d.startShard(c, i, g.targets, targetIPs[fmt.Sprintf("shard%d", i)], "--log-format", "json")
		ctx, cancel := context.WithTimeout(context.Background(), leaderWait)
		err := c.client.RegisterTarget(ctx, &logstorepb.RegisteredTarget{
			Id: s.id, Address: fmt.Sprintf("shard%d:%s", i, ctrShardPort), Topics: []string{s.id}})
		cancel()
		if err != nil {
			t.Fatalf("register target %s: %v", s.id, err)
		}
	}
	for _, m := range dockerMembers {
		g.metrics[m] = freeAddr(t)
		args := []string{"player", "--id", m, "--group", dockerGroupName, "--store", strings.Join(c.storeAddrs(), ","),
			"--progress-interval", playerProgress.String(), "--report-interval", "1s", "--log-format", "json",
			"--admin-addr", "0.0.0.0:7420", "--metrics-addr", "0.0.0.0:" + ctrMetricsPort}
		args = append(args, c.tls.args("player")...)
		d.runOn(g.targets, targetIPs[m], m, m, []string{g.metrics[m] + ":" + ctrMetricsPort}, args...)
		d.docker("network", "connect", "--ip", d.ips[m], "--alias", m, d.network, d.name(m))
	}
	d.c = c
	return g
}

// describe is the group as the LogStore leader sees it.
func (g *dockerGroup) describe() (*logstorepb.DescribeGroupResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	return g.c.client.DescribeGroup(ctx, dockerGroupName)
}

// assignments are the group's assignments by target id.
func (g *dockerGroup) assignments() (map[string]*logstorepb.Assignment, error) {
	dg, err := g.describe()
	if err != nil {
		return nil, err
	}
	out := map[string]*logstorepb.Assignment{}
	for _, a := range dg.Assignments {
		out[a.Target.GetId()] = a
	}
	return out, nil
}

// lease is the group's lease.
func (g *dockerGroup) lease() time.Duration {
	dg, err := g.describe()
	if err != nil {
		return 0
	}
	return time.Duration(dg.LeaseNanos)
}

// waitBalanced waits until both members are live, every shard is owned,
// each member owns one target at least (3 over 2: 2 and 1) and each owner
// streams to its targets (the shard applied what the LogStore committed);
// then it returns the assignments.
func (g *dockerGroup) waitBalanced() map[string]*logstorepb.Assignment {
	var as map[string]*logstorepb.Assignment
	g.c.waitFor(progressMax, "a balanced group of "+strings.Join(dockerMembers, ", "), func() error {
		dg, err := g.describe()
		if err != nil {
			return err
		}
		owns := map[string]int{}
		as = map[string]*logstorepb.Assignment{}
		for _, a := range dg.Assignments {
			as[a.Target.GetId()] = a
			owns[a.MemberId]++
		}
		for _, s := range g.c.shards {
			if as[s.id] == nil || as[s.id].MemberId == "" {
				return fmt.Errorf("%s has no owner: %s", s.id, ownersText(as))
			}
		}
		for _, m := range dockerMembers {
			if owns[m] == 0 {
				return fmt.Errorf("%s owns no target: %s", m, ownersText(as))
			}
		}
		return nil
	})
	// Each owner delivers with its token: the target's epoch is the token.
	g.c.waitFor(progressMax, "every target at its owner's token", func() error {
		for _, s := range g.c.shards {
			v, err := metricValue(s.metrics, "target_epoch", fmt.Sprintf("target=%q", s.id))
			if err != nil {
				return err
			}
			if uint64(v) != as[s.id].Token {
				return fmt.Errorf("%s at epoch %v, its owner %s has token %d", s.id, v, as[s.id].MemberId, as[s.id].Token)
			}
		}
		return nil
	})
	return as
}

// busiest returns the member owning the most targets, and the other.
func (g *dockerGroup) busiest(as map[string]*logstorepb.Assignment) (string, string) {
	owns := map[string]int{}
	for _, a := range as {
		owns[a.MemberId]++
	}
	if owns[dockerMembers[1]] > owns[dockerMembers[0]] {
		return dockerMembers[1], dockerMembers[0]
	}
	return dockerMembers[0], dockerMembers[1]
}

func ownersText(as map[string]*logstorepb.Assignment) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(as)) {
		parts = append(parts, fmt.Sprintf("%s=%s/token %d", id, as[id].MemberId, as[id].Token))
	}
	return strings.Join(parts, " ")
}

// logLine is one line of a component's JSON log (the fields the test
// reads).
type logLine struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	Player  string    `json:"player"`
	Epoch   uint64    `json:"epoch"`
	Err     any       `json:"err"`
	Targets int       `json:"targets"`
}

// logs returns the JSON lines the container of id logged since from.
func (g *dockerGroup) logs(id string, from time.Time) ([]logLine, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerCmdMax)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "logs", "--since", from.Add(-time.Second).Format(time.RFC3339Nano), g.d.name(id)).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("docker logs %s: %v: %s", id, err, out)
	}
	var lines []logLine
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && !l.Time.Before(from) {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

// newStreamsOpen returns, for each moved target, when it logged the
// stream of owner with the new token (after) open, or an error while one
// has not.
func (g *dockerGroup) newStreamsOpen(moved []string, before, after map[string]*logstorepb.Assignment, owner string, from time.Time) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, id := range moved {
		lines, err := g.logs(id, from)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			if l.Msg == streamOpenLog && l.Player == owner && l.Epoch == after[id].Token {
				out[id] = l.Time
				break
			}
		}
		if out[id].IsZero() {
			return nil, fmt.Errorf("%s logged no %q of %s with epoch %d yet (old token %d)", id, streamOpenLog, owner, after[id].Token, before[id].Token)
		}
	}
	return out, nil
}

// checkStoppedFirst checks that the cut member stopped delivering before
// the new owner's stream opened at each moved target: its lease lapsed
// (logged) before, and no moved target logged its old-token stream taken
// over by a newer one (the target's applier ends the active stream with
// STALE_EPOCH when a newer token's Hello arrives while it is open). It
// returns when the lease lapsed.
func (g *dockerGroup) checkStoppedFirst(cut string, moved []string, before map[string]*logstorepb.Assignment, opened map[string]time.Time, from time.Time) time.Time {
	t := g.t
	var lapsed time.Time
	g.c.waitFor(dockerFailoverMax, cut+" to log its lease lapse", func() error {
		lines, err := g.logs(cut, from)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if l.Msg == leaseLapsedLog {
				lapsed = l.Time
				return nil
			}
		}
		return fmt.Errorf("no %q in %s's log yet", leaseLapsedLog, cut)
	})
	// Cut from the stores only: its target streams stayed up until the
	// lapse stopped them (a stopped runner logs no stream end).
	lines, err := g.logs(cut, from)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if l.Msg == streamEndedLog && l.Time.Before(lapsed) {
			t.Errorf("%s lost a target stream at %v, before its lease lapsed: the partition cut it from the targets too", cut, l.Time.Format(time.StampMicro))
		}
	}
	for _, id := range moved {
		if !lapsed.Before(opened[id]) {
			t.Errorf("%s's lease lapsed at %v, not before the new owner's stream opened at %s (%v)",
				cut, lapsed.Format(time.StampMicro), id, opened[id].Format(time.StampMicro))
		}
		lines, err := g.logs(id, from)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if l.Msg == streamCloseLog && l.Epoch == before[id].Token && l.Err != nil && strings.Contains(fmt.Sprint(l.Err), "took over") {
				t.Errorf("%s: the old token %d's stream was still open when a newer one took over (%v at %v): the cut member had not stopped",
					id, before[id].Token, l.Err, l.Time.Format(time.StampMicro))
			}
		}
	}
	return lapsed
}
