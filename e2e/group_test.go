package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
)

// The LogPlayer group under faults (issue #13, "How it is proven", first
// bullet): 3 store nodes, the 3 shards, the events target (`logplayer
// events`, topics orders and inventory, every message kept in its bbolt
// file) and 3 LogPlayers in one group, as real processes, under the demo
// workload. The events target is one more registered target: the group
// assigns and moves it like a shard, and at the end its file must hold
// exactly the log's messages of its topics (checkEvents).

// groupName is the LogPlayer group of the test.
const groupName = "e2e"

// groupPlayers is how many LogPlayers the group has.
const groupPlayers = 3

// failoverMax is the liveness bound on a failover (the goal is 2x
// the 3 s lease; this bound only catches a failover that does not happen).
const failoverMax = 30 * time.Second

// groupMember is one LogPlayer process of the group.
type groupMember struct {
	id, admin, metrics string
	proc               *proc
	adminc             playerpb.PlayerAdminClient
}

// playerGroup is the test's LogPlayer group and its view of the LogStore's
// PlayerGroup service.
type playerGroup struct {
	c       *cluster
	members []*groupMember
	// pg has a PlayerGroup client per store node, by node id.
	pg map[string]logstorepb.PlayerGroupClient
}

func (g *playerGroup) procs() []*proc {
	var out []*proc
	for _, m := range g.members {
		out = append(out, m.proc)
	}
	return out
}

// startGroup starts the group's LogPlayers, each with every target (the
// shards and the events target) as a --target (each registers them: the
// same config again changes nothing), and makes it c's.
func startGroup(c *cluster) *playerGroup {
	c.t.Helper()
	var targets []string
	for _, s := range c.shards {
		targets = append(targets, fmt.Sprintf("%s=%s/%s", s.id, s.addr, s.id))
	}
	if c.events != nil {
		targets = append(targets, c.events.spec())
	}
	g := newPlayerGroup(c, groupPlayers, targets)
	c.group = g
	for _, m := range g.members {
		m.proc.start()
	}
	return g
}

// newPlayerGroup returns n members p1…pn of group groupName (not started),
// each registering targets (--target flags), and the group's PlayerGroup
// clients.
func newPlayerGroup(c *cluster, n int, targets []string) *playerGroup {
	c.t.Helper()
	g := &playerGroup{c: c, pg: map[string]logstorepb.PlayerGroupClient{}}
	for _, n := range c.stores {
		g.pg[n.id] = logstorepb.NewPlayerGroupClient(dial(c.t, n.api, c.tls.dialOptions(c.t)...))
	}
	base := c.playerArgs()
	if i := slices.Index(base, "--id"); i >= 0 {
		base = slices.Delete(base, i, i+2)
	}
	for i := range n {
		m := &groupMember{id: fmt.Sprintf("p%d", i+1), admin: freeAddr(c.t), metrics: freeAddr(c.t)}
		args := append(slices.Clone(base), "--id", m.id, "--group", groupName,
			"--admin-addr", m.admin, "--metrics-addr", m.metrics)
		for _, t := range targets {
			args = append(args, "--target", t)
		}
		m.proc = newProc(c.t, c.dir, m.id, args...)
		m.adminc = playerpb.NewPlayerAdminClient(dial(c.t, m.admin, c.tls.dialOptions(c.t)...))
		g.members = append(g.members, m)
	}
	return g
}

// describe is DescribeGroup and ListRegisteredTargets at the leader (the
// reads answer from the node's applied state: the leader's is the latest).
func (g *playerGroup) describe() (*logstorepb.DescribeGroupResponse, *logstorepb.ListRegisteredTargetsResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	st, err := g.c.client.LeaderStatus(ctx)
	if err != nil {
		return nil, nil, err
	}
	pg := g.pg[st.NodeId]
	if pg == nil {
		return nil, nil, fmt.Errorf("leader %q is no store node of the test", st.NodeId)
	}
	d, err := pg.DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{Group: groupName})
	if err != nil {
		return nil, nil, fmt.Errorf("describe group: %w", err)
	}
	l, err := pg.ListRegisteredTargets(ctx, &logstorepb.ListRegisteredTargetsRequest{Group: groupName})
	if err != nil {
		return nil, nil, fmt.Errorf("list registered targets: %w", err)
	}
	return d, l, nil
}

// owners maps each target to its assignment.
func owners(d *logstorepb.DescribeGroupResponse) map[string]*logstorepb.Assignment {
	out := map[string]*logstorepb.Assignment{}
	for _, a := range d.Assignments {
		out[a.GetTarget().GetId()] = a
	}
	return out
}

// registered maps each target process of c to what the members register
// for it: registration(address, topics).
func (c *cluster) registered() map[string]string {
	out := map[string]string{}
	for _, s := range c.shards {
		out[s.id] = registration(s.addr, []string{s.id})
	}
	if e := c.events; e != nil {
		out[e.id] = registration(e.addr, eventsTopics)
	}
	return out
}

// registration is a registered target's address and topics, in one
// comparable string (the topics sorted).
func registration(addr string, topics []string) string {
	return addr + "/" + strings.Join(slices.Sorted(slices.Values(topics)), ",")
}

// waitBalanced waits until the registry holds exactly the targets (with the
// addresses and topics every member registered), every member is in the
// group and owns its share of them (targets/members, rounded down or up),
// and every target applied lsn.
func (g *playerGroup) waitBalanced(lsn uint64) *logstorepb.DescribeGroupResponse {
	c := g.c
	c.t.Helper()
	want := c.registered()
	lo, hi := len(want)/groupPlayers, (len(want)+groupPlayers-1)/groupPlayers
	var last *logstorepb.DescribeGroupResponse
	c.waitFor(progressMax, fmt.Sprintf("the group balanced (%d members, %d-%d of the %d targets each) and every target at lsn %d", groupPlayers, lo, hi, len(want), lsn), func() error {
		d, l, err := g.describe()
		if err != nil {
			return err
		}
		if len(l.Targets) != len(want) {
			return fmt.Errorf("%d registered targets, want %d", len(l.Targets), len(want))
		}
		for _, rt := range l.Targets {
			if w, ok := want[rt.Id]; !ok || registration(rt.Address, rt.Topics) != w {
				c.t.Fatalf("registered target %v: not the target the members registered (%q)", rt, w)
			}
		}
		if len(d.Members) != groupPlayers {
			return fmt.Errorf("%d members, want %d", len(d.Members), groupPlayers)
		}
		for _, m := range d.Members {
			if int(m.Targets) < lo || int(m.Targets) > hi {
				return fmt.Errorf("member %s owns %d targets, want %d-%d", m.MemberId, m.Targets, lo, hi)
			}
		}
		for id, a := range owners(d) {
			if a.MemberId == "" || a.Token == 0 {
				return fmt.Errorf("%s has no owner (token %d)", id, a.Token)
			}
		}
		for _, s := range c.targets() {
			if _, err := s.applied(lsn); err != nil {
				return err
			}
		}
		last = d
		return nil
	})
	g.waitSettled(last)
	return last
}

// waitSettled waits until every member delivers to exactly its targets of
// d, each with its token (its admin API's view): every previous owner has
// learned of the moves (at its next renewal) and ended its streams, which
// the new owners' tokens fence meanwhile (stale_epoch).
func (g *playerGroup) waitSettled(d *logstorepb.DescribeGroupResponse) {
	c := g.c
	c.t.Helper()
	want := map[string]map[string]uint64{}
	for _, a := range d.Assignments {
		if want[a.MemberId] == nil {
			want[a.MemberId] = map[string]uint64{}
		}
		want[a.MemberId][a.GetTarget().GetId()] = a.Token
	}
	c.waitFor(progressMax, fmt.Sprintf("every member to deliver its assignment of generation %d", d.Generation), func() error {
		for _, m := range g.members {
			ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
			resp, err := m.adminc.ListTargets(ctx, &playerpb.ListTargetsRequest{})
			cancel()
			if err != nil {
				return fmt.Errorf("%s: %w", m.id, err)
			}
			have := map[string]uint64{}
			for _, ts := range resp.Targets {
				have[ts.GetConfig().GetId()] = ts.Epoch
			}
			if !maps.Equal(have, want[m.id]) {
				return fmt.Errorf("%s delivers to %v (generation %d), assigned %v (generation %d)",
					m.id, have, resp.GetGroup().GetGeneration(), want[m.id], d.Generation)
			}
		}
		return nil
	})
}

// failover is one measured player fault.
type failover struct {
	round   int
	fault   string
	victim  string
	targets []string
	atLSN   uint64
	took    time.Duration
	// moves is how many changes of owner the group counted from the
	// fault until it was balanced again; lapses how many lease lapses the
	// members other than the victim counted meanwhile.
	moves, lapses uint64
}

// lapses sums logplayer_group_lease_lapses_total over the members but
// except (counters of their current processes).
func (g *playerGroup) lapses(except string) uint64 {
	var n float64
	for _, m := range g.members {
		if m.id == except {
			continue
		}
		v, err := metricValue(m.metrics, "logplayer_group_lease_lapses_total", "")
		if err != nil {
			g.c.t.Fatalf("%s: %v", m.id, err)
		}
		n += v
	}
	return uint64(n)
}

// measureFailover waits until every target in owned has an owner other
// than victim that delivered it beyond lsn (its applied LSN passed the
// leader's head at the fault), and returns the time since began. With
// victim "", any owner will do.
func (g *playerGroup) measureFailover(victim string, owned []string, lsn uint64, began time.Time) time.Duration {
	c := g.c
	c.t.Helper()
	deadline := began.Add(failoverMax)
	for {
		err := func() error {
			d, _, err := g.describe()
			if err != nil {
				return err
			}
			as := owners(d)
			for _, id := range owned {
				if a := as[id]; a == nil || a.MemberId == "" || a.MemberId == victim {
					return fmt.Errorf("%s still owned by %q", id, a.GetMemberId())
				}
				if _, err := c.target(id).applied(lsn + 1); err != nil {
					return err
				}
			}
			return nil
		}()
		if err == nil {
			return time.Since(began)
		}
		if err := c.alive(); err != nil {
			c.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("failover of %v from %s: not done within the liveness bound %v (not a timing goal: the targets never moved, or their new owner never delivered): %v",
				owned, victim, failoverMax, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (g *playerGroup) member(id string) *groupMember {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	g.c.t.Fatalf("no member %q", id)
	return nil
}

// ownedBy lists the targets m owns in d.
func ownedBy(d *logstorepb.DescribeGroupResponse, member string) []string {
	var out []string
	for _, a := range d.Assignments {
		if a.MemberId == member {
			out = append(out, a.GetTarget().GetId())
		}
	}
	slices.Sort(out)
	return out
}

// ownerOf is the member d assigns target to ("" if none).
func ownerOf(d *logstorepb.DescribeGroupResponse, target string) string {
	for _, a := range d.Assignments {
		if a.GetTarget().GetId() == target {
			return a.MemberId
		}
	}
	return ""
}

// maxToken is the highest token of d.
func maxToken(d *logstorepb.DescribeGroupResponse) uint64 {
	var m uint64
	for _, a := range d.Assignments {
		m = max(m, a.Token)
	}
	return m
}

// lastTokens returns, for checkDurable, each target's current token (read
// once now): what its durable epoch must be, the last owner's fencing
// token. Each must be at most the cluster's epoch (the same counter).
func (g *playerGroup) lastTokens(ctx context.Context, t testing.TB, epoch uint64) func(string) (uint64, string) {
	t.Helper()
	_, l, err := g.describe()
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	tokens := map[string]uint64{}
	for _, a := range l.Assignments {
		if a.Group != groupName {
			continue
		}
		id := a.GetTarget().GetId()
		tokens[id] = a.Token
		if a.Token == 0 || a.Token > epoch {
			t.Errorf("%s: token %d, want in [1, cluster epoch %d]", id, a.Token, epoch)
		}
	}
	return func(id string) (uint64, string) { return tokens[id], "its last owner's token" }
}

// checkMetrics checks every member's LogPlayer metrics (counters of its
// current process only): no delivery faults; a refusal is allowed only as
// STALE_EPOCH (a member fenced by a newer token).
func (g *playerGroup) checkMetrics(t testing.TB) {
	t.Helper()
	for _, m := range g.members {
		info, err := checkPlayerMetrics(m.metrics, `code="STALE_EPOCH"`)
		if err != nil {
			t.Errorf("%s: %v", m.id, err)
		}
		group, gerr := scrape(m.metrics, "logplayer_group_reassignments_total", "logplayer_group_lease_lapses_total", "logplayer_group_heartbeat_errors_total")
		if gerr != nil {
			t.Errorf("%s: %v", m.id, gerr)
		}
		for _, x := range group {
			info = append(info, fmt.Sprintf("%s{%s} %v", x.name, x.labels, x.value))
		}
		t.Logf("LogPlayer %s (last instance):\n%s", m.id, strings.Join(info, "\n"))
	}
}

// TestPlayerGroupUnderFaults runs a LogPlayer group as real processes under
// the demo workload: 3 store nodes, 3 shards, the events target, 3
// LogPlayers in group "e2e" (TLS with a policy; each registers the shards
// and the events target as targets). Each round,
// in a seeded order with seeded victims (the first player fault always
// takes the events target's owner, so its file sees a handover): SIGKILL a player (its targets
// move; restarted, it rejoins and takes a share again); SIGSTOP a player
// past its lease (its targets move; on SIGCONT its lease has lapsed: it
// stops delivering, and rejoins with new tokens); SIGKILL the LogStore
// leader (restarted; its delivery gap measured the same way). After each
// fault the group must be balanced again, every member delivering exactly
// its assignment. Each fault's failover time, from the fault until every
// target the victim owned has a new owner that delivered past the head at
// the fault, is printed in a table; the only bound is failoverMax
// (liveness). Then verify: the log against the acknowledged Appends, every
// shard exactly the log's messages for its topic (the model), the events
// target's file exactly the log's orders and inventory messages (each
// once, in order, at its offset), no target refusal but stale_epoch
// (fenced tokens) and superseded during the faults and joins, no
// player-side refusal but STALE_EPOCH, and each target's durable epoch
// its last owner's token.
func TestPlayerGroupUnderFaults(t *testing.T) {
	n := *rounds
	if n == 0 {
		n = 2
		if *long {
			n = 6
		}
	}
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed %d), %d rounds", s, s, n)
	rng := rand.New(rand.NewPCG(s, 0x9e3779b97f4a7c15))
	began := time.Now()
	binary(t)
	t.Logf("%v: binary built", since(began))

	c := startClusterWith(t, clusterOptions{noPlayer: true, playerAdmin: true, events: true})
	// Refusals allowed: none in steady state; during a fault (and the
	// joins) stale_epoch, the new owner's token fencing the old owner's
	// streams, and superseded, a member's newer stream with the same token
	// taking over its own older one (allowFenced).
	var watched []watchedTarget
	for _, x := range c.targets() {
		watched = append(watched, x)
	}
	refusals := watchTargets(t, watched)
	ld := startLoad(t, c.client, c.shards, s)
	var g *playerGroup
	var d *logstorepb.DescribeGroupResponse
	// The members join one by one: the first takes every target, and each
	// join moves some to the newcomer with new tokens, fencing the streams
	// of the previous owner (stale_epoch) until it learns of the move.
	fenced := allowFenced(refusals, func() {
		g = startGroup(c)
		c.waitAcked(ld)
		d = g.waitBalanced(ld.acks.max.Load())
	})
	t.Logf("%v: cluster and group up, %d acknowledged, owners %v; stale_epoch refusals meanwhile %v", since(began), ld.acks.n.Load(), ownerList(d), fenced)

	var table []failover
	eventsHit := false // the first player fault takes the events target's owner
	for r := range n {
		faults := []string{"kill", "stop", "leader"}
		rng.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
		for _, f := range faults {
			fenced := allowFenced(refusals, func() {
				var fo failover
				victim := ""
				switch {
				case f == "leader":
				case !eventsHit:
					victim, eventsHit = ownerOf(d, eventsTarget), true
				default:
					victim = g.members[rng.IntN(len(g.members))].id
				}
				lapses := g.lapses(victim)
				if f == "leader" {
					fo = g.leaderFault(ld, r+1)
				} else {
					fo = g.playerFault(ld, r+1, f, g.member(victim))
				}
				after := g.waitBalanced(ld.acks.max.Load())
				d = after
				fo.moves = after.Reassignments - fo.moves
				fo.lapses = g.lapses(victim) - lapses
				table = append(table, fo)
			})
			t.Logf("%v: round %d: %s done; stale_epoch refusals meanwhile %v", since(began), r+1, f, fenced)
		}
	}

	c.waitAcked(ld)
	var out strings.Builder
	fmt.Fprintf(&out, "%-5s %-6s %-6s %-31s %-8s %-9s %-5s %s\n", "ROUND", "FAULT", "VICTIM", "TARGETS", "AT LSN", "FAILOVER", "MOVES", "LAPSES")
	for _, f := range table {
		fmt.Fprintf(&out, "%-5d %-6s %-6s %-31s %-8d %-9v %-5d %d\n", f.round, f.fault, f.victim, strings.Join(f.targets, ","), f.atLSN, f.took.Round(time.Millisecond), f.moves, f.lapses)
	}
	t.Logf("failover times (kill, stop: from the fault until every target of the victim has a new owner that delivered past the head at the fault; "+
		"leader: from the LogStore leader's SIGKILL until every target delivered past it; moves: changes of owner until balanced again; lapses: lease lapses of the other members; lease 3 s):\n%s", out.String())
	verify(t, began, c, ld, refusals, func() {
		for _, s := range c.shards {
			s.proc.terminate()
		}
		c.events.proc.terminate()
	})
	for _, p := range c.allProcs() {
		p.checkLog()
	}
}

// allowFenced allows stale_epoch and superseded refusals while fn runs and
// returns the stale_epoch ones per target.
func allowFenced(w *refusalWatch, fn func()) map[string]float64 {
	var fenced map[string]float64
	w.allowDuring("superseded", func() { fenced = w.allowDuring("stale_epoch", fn) })
	return fenced
}

func ownerList(d *logstorepb.DescribeGroupResponse) []string {
	var out []string
	for _, a := range d.Assignments {
		out = append(out, fmt.Sprintf("%s=%s/%d", a.GetTarget().GetId(), a.MemberId, a.Token))
	}
	slices.Sort(out)
	return out
}

// playerFault SIGKILLs (kind "kill") or SIGSTOPs ("stop") victim under
// load, measures the failover of its targets, then brings it back: a
// restart, or SIGCONT once it was stopped for longer than twice the lease
// (it must notice its lease lapsed). Either way it must rejoin and own a
// target again with a token newer than every token at the fault.
func (g *playerGroup) playerFault(ld *load, round int, kind string, victim *groupMember) failover {
	c := g.c
	c.t.Helper()
	d, _, err := g.describe()
	if err != nil {
		c.t.Fatal(err)
	}
	owned := ownedBy(d, victim.id)
	if len(owned) == 0 {
		c.t.Fatalf("%s owns no target before the fault: %v", victim.id, ownerList(d))
	}
	tokenBefore := maxToken(d)
	lease := time.Duration(d.LeaseNanos)
	st := c.leaderStatus()
	f := failover{round: round, fault: kind, victim: victim.id, targets: owned, atLSN: st.HeadLsn, moves: d.Reassignments}
	lapses := 0.0
	if kind == "stop" {
		if lapses, err = metricValue(victim.metrics, "logplayer_group_lease_lapses_total", ""); err != nil {
			c.t.Fatal(err)
		}
	}
	at := time.Now()
	switch kind {
	case "kill":
		victim.proc.kill()
	case "stop":
		victim.proc.signal(syscall.SIGSTOP)
	}
	f.took = g.measureFailover(victim.id, owned, f.atLSN, at)
	c.t.Logf("%s %s: %v moved in %v", kind, victim.id, owned, f.took.Round(time.Millisecond))
	c.waitAcked(ld)
	switch kind {
	case "kill":
		victim.proc.start()
	case "stop":
		if rest := 2*lease - time.Since(at); rest > 0 {
			time.Sleep(rest)
		}
		victim.proc.signal(syscall.SIGCONT)
		// Its lease lapsed while it was stopped: the first thing it does
		// is stop delivering (the lapse timer; every Send checks the
		// deadline too).
		c.waitFor(progressMax, victim.id+" to count its lease lapse", func() error {
			v, err := metricValue(victim.metrics, "logplayer_group_lease_lapses_total", "")
			if err == nil && v <= lapses {
				err = fmt.Errorf("lease lapses %v, was %v", v, lapses)
			}
			return err
		})
	}
	c.waitFor(progressMax, victim.id+" to rejoin with a new token", func() error {
		d, _, err := g.describe()
		if err != nil {
			return err
		}
		for _, a := range d.Assignments {
			if a.MemberId == victim.id && a.Token > tokenBefore {
				return nil
			}
		}
		return fmt.Errorf("%s owns nothing with a token above %d: %v", victim.id, tokenBefore, ownerList(d))
	})
	return f
}

// leaderFault SIGKILLs the LogStore leader under load and measures how
// long every target goes without delivery past the head at the kill (the
// members renew their leases through the leader: a failover longer than
// the lease ends them in log time, and the group reassigns), then restarts
// it as killLeader does.
func (g *playerGroup) leaderFault(ld *load, round int) failover {
	c := g.c
	c.t.Helper()
	d, _, err := g.describe()
	if err != nil {
		c.t.Fatal(err)
	}
	st, old := c.leader()
	f := failover{round: round, fault: "leader", victim: old.id, atLSN: st.HeadLsn, moves: d.Reassignments}
	for _, s := range c.targets() {
		f.targets = append(f.targets, s.targetID())
	}
	at := time.Now()
	old.proc.kill()
	f.took = g.measureFailover("", f.targets, f.atLSN, at)
	after, _, err := g.describe()
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("leader %s killed: every target delivered past lsn %d after %v; owners %v, then %v", old.id, f.atLSN, f.took.Round(time.Millisecond), ownerList(d), ownerList(after))
	c.waitNewLeader(old, st)
	c.waitAcked(ld)
	old.proc.start()
	c.waitRejoined(old)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	return f
}
