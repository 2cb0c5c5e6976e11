package fsm

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

const sec = int64(1_000_000_000)

// groupSM is a Machine at cluster version 3 with helpers for PlayerGroup
// commands; every apply checks the assignment invariants.
type groupSM struct {
	t      *testing.T
	m      *Machine
	idx    uint64
	limits *logstorepb.ApplyLimits
	tokens map[string]uint64 // last token seen per target (group "g")
	owners map[string]string
}

func newGroupSM(t *testing.T) *groupSM {
	m, _ := newTestSM()
	g := &groupSM{t: t, m: m, tokens: map[string]uint64{}, owners: map[string]string{}}
	if r := g.at(0, SetClusterVersionCommand(3)); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	return g
}

func groupCmd(c *logstorepb.GroupCommand) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_Group{Group: c}}
}

func reg(id string, topics ...string) *logstorepb.Command {
	if len(topics) == 0 {
		topics = []string{"t"}
	}
	return groupCmd(&logstorepb.GroupCommand{Op: &logstorepb.GroupCommand_RegisterTarget{
		RegisterTarget: &logstorepb.RegisteredTarget{Id: id, Address: "h:1", Topics: topics}}})
}

func unreg(id string) *logstorepb.Command {
	return groupCmd(&logstorepb.GroupCommand{Op: &logstorepb.GroupCommand_UnregisterTarget{UnregisterTarget: id}})
}

func hb(member, inc string) *logstorepb.Command {
	return groupCmd(&logstorepb.GroupCommand{Op: &logstorepb.GroupCommand_Heartbeat{
		Heartbeat: &logstorepb.GroupHeartbeatRequest{Group: "g", MemberId: member, Incarnation: inc}}})
}

func leave(member, inc string) *logstorepb.Command {
	return groupCmd(&logstorepb.GroupCommand{Op: &logstorepb.GroupCommand_Leave{
		Leave: &logstorepb.LeaveGroupRequest{Group: "g", MemberId: member, Incarnation: inc}}})
}

func nextEpoch() *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_NextEpoch{NextEpoch: &logstorepb.NextEpochRequest{}}}
}

// at applies cmds as one entry at log time ts and checks the invariants.
func (g *groupSM) at(ts int64, cmds ...*logstorepb.Command) []Result {
	g.t.Helper()
	g.idx++
	out := g.m.Apply(g.idx, &logstorepb.Entry{TimestampUnixNano: ts, Commands: cmds, Limits: g.limits})
	g.check()
	return out
}

// ok applies cmds and fails on any refusal.
func (g *groupSM) ok(ts int64, cmds ...*logstorepb.Command) []Result {
	g.t.Helper()
	out := g.at(ts, cmds...)
	for i, r := range out {
		if r.Err != nil {
			g.t.Fatalf("command %d: %v", i, r.Err)
		}
	}
	return out
}

// check: with members, every target is owned by exactly one live member
// of group g, counts differ by at most one, and a target's token rises
// exactly when its owner changes and never exceeds the epoch.
func (g *groupSM) check() {
	g.t.Helper()
	st := g.m.st
	d := st.DescribeGroup("g")
	counts := map[string]int{}
	for _, m := range d.Members {
		counts[m.MemberId] = 0
	}
	for _, a := range d.Assignments {
		id := a.Target.Id
		if len(d.Members) == 0 {
			if a.MemberId != "" {
				g.t.Fatalf("target %s owned by %s with no members", id, a.MemberId)
			}
			continue
		}
		if _, live := counts[a.MemberId]; !live {
			g.t.Fatalf("target %s owned by %q, not a live member", id, a.MemberId)
		}
		counts[a.MemberId]++
		if a.Token > uint64(st.epoch) {
			g.t.Fatalf("target %s token %d above epoch %d", id, a.Token, st.epoch)
		}
		if a.Token < g.tokens[id] || (a.Token == g.tokens[id] && a.MemberId != g.owners[id]) {
			g.t.Fatalf("target %s: token %d owner %s after token %d owner %s", id, a.Token, a.MemberId, g.tokens[id], g.owners[id])
		}
		g.tokens[id], g.owners[id] = a.Token, a.MemberId
	}
	lo, hi := len(d.Assignments), 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(counts) > 0 && hi-lo > 1 {
		g.t.Fatalf("unbalanced: %v", counts)
	}
}

// owned returns member's targets in group g, sorted.
func (g *groupSM) owned(member string) []string {
	var out []string
	for _, a := range g.m.st.GroupAssignments("g", member) {
		out = append(out, a.Target.Id)
	}
	return out
}

func (g *groupSM) counters() (gen, moves uint64) {
	d := g.m.st.DescribeGroup("g")
	return d.Generation, d.Reassignments
}

func TestGroupAssignmentStickyAndBalanced(t *testing.T) {
	g := newGroupSM(t)
	for i := range 6 {
		g.ok(sec, reg(fmt.Sprintf("t%d", i)))
	}
	g.ok(sec, hb("a", "1"))
	if got := g.owned("a"); len(got) != 6 {
		t.Fatalf("a owns %v, want all 6", got)
	}
	if _, moves := g.counters(); moves != 0 {
		t.Fatalf("first assignment counted %d reassignments", moves)
	}
	before := slices.Clone(g.owned("a"))
	g.ok(sec, hb("b", "1"))
	a, b := g.owned("a"), g.owned("b")
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("a %v b %v, want 3 each", a, b)
	}
	// Sticky: a keeps the smallest ids of what it held.
	if !slices.Equal(a, before[:3]) {
		t.Fatalf("a kept %v, want %v", a, before[:3])
	}
	_, moves := g.counters()
	if moves != 3 {
		t.Fatalf("reassignments %d, want 3", moves)
	}
	g.ok(sec, hb("c", "1"))
	if _, m := g.counters(); m != moves+2 {
		t.Fatalf("c's join moved %d targets, want 2 (the fewest)", m-moves)
	}
	// A renewal moves nothing and keeps the generation.
	gen, moves := g.counters()
	g.ok(2*sec, hb("a", "1"), hb("b", "1"), hb("c", "1"))
	if g2, m2 := g.counters(); g2 != gen || m2 != moves {
		t.Fatalf("renewals changed generation %d->%d reassignments %d->%d", gen, g2, moves, m2)
	}
	bOwned := g.owned("b")
	g.ok(2*sec, leave("b", "1"))
	if _, m := g.counters(); m != moves+uint64(len(bOwned)) {
		t.Fatalf("b's leave moved %d targets, want %d", m-moves, len(bOwned))
	}
	if len(g.owned("a")) != 3 || len(g.owned("c")) != 3 {
		t.Fatalf("after leave a %v c %v", g.owned("a"), g.owned("c"))
	}
	if g2, _ := g.counters(); g2 <= gen {
		t.Fatalf("generation %d not above %d after a leave", g2, gen)
	}
}

func TestGroupTokensExceedEpochs(t *testing.T) {
	g := newGroupSM(t)
	e1 := g.ok(sec, nextEpoch())[0].Resp.(*logstorepb.NextEpochResponse).Epoch
	g.ok(sec, reg("x"), hb("a", "1"))
	tok := g.m.st.GroupAssignments("g", "a")[0].Token
	if tok <= e1 {
		t.Fatalf("token %d not above epoch %d", tok, e1)
	}
	e2 := g.ok(sec, nextEpoch())[0].Resp.(*logstorepb.NextEpochResponse).Epoch
	if e2 <= tok {
		t.Fatalf("epoch %d not above token %d", e2, tok)
	}
	g.ok(sec, hb("a", "2")) // a restarted: new incarnation, new token
	if tok2 := g.m.st.GroupAssignments("g", "a")[0].Token; tok2 <= e2 {
		t.Fatalf("token after restart %d not above epoch %d", tok2, e2)
	}
}

func TestGroupLeaseExpiresInLogTime(t *testing.T) {
	g := newGroupSM(t)
	g.limits = &logstorepb.ApplyLimits{GroupLeaseNanos: 3 * sec}
	g.ok(0, reg("x"), reg("y"), hb("a", "1"), hb("b", "1"))
	if len(g.owned("b")) != 1 {
		t.Fatalf("b owns %v", g.owned("b"))
	}
	// Only a heartbeats: b's lease (ends at 3 s) holds while log time is
	// below its end, whatever the clock.
	for _, ts := range []int64{sec, 2 * sec, 3*sec - 1} {
		g.ok(ts, hb("a", "1"))
		if len(g.owned("b")) != 1 {
			t.Fatalf("b lost its target at log time %d", ts)
		}
	}
	r := g.ok(3*sec, hb("a", "1"))[0].Resp.(*logstorepb.GroupHeartbeatResponse)
	if len(g.owned("a")) != 2 || len(g.m.st.DescribeGroup("g").Members) != 1 {
		t.Fatalf("at log time 3 s b is not expired: a %v", g.owned("a"))
	}
	if len(r.Assignments) != 2 || r.LeaseNanos != 3*sec || r.LeaseExpiresUnixNano != 6*sec || r.LogTimeUnixNano != 3*sec {
		t.Fatalf("heartbeat response %v", r)
	}
	// Any entry advances log time: an epoch alone expires a (entries at
	// most half a lease apart: a longer gap is a stall, see
	// TestGroupSurvivesLogTimeStall).
	g.ok(4500*sec/1000, nextEpoch())
	g.ok(6*sec, nextEpoch())
	if d := g.m.st.DescribeGroup("g"); len(d.Members) != 0 || d.Assignments[0].MemberId != "" {
		t.Fatalf("a not expired at 6 s: %v", d)
	}
}

func TestGroupIncarnationChangeIsLeaveAndJoin(t *testing.T) {
	g := newGroupSM(t)
	g.ok(sec, reg("x"), reg("y"), hb("a", "1"))
	old := g.m.st.GroupAssignments("g", "a")
	g.ok(sec, hb("a", "2"))
	now := g.m.st.GroupAssignments("g", "a")
	if len(now) != 2 {
		t.Fatalf("a owns %v", now)
	}
	for i := range now {
		if now[i].Token <= old[i].Token {
			t.Fatalf("target %s kept token %d across a restart", now[i].Target.Id, now[i].Token)
		}
	}
	if _, moves := g.counters(); moves != 2 {
		t.Fatalf("reassignments %d, want 2", moves)
	}
	// A leave from the old incarnation changes nothing.
	g.ok(sec, leave("a", "1"))
	if len(g.owned("a")) != 2 {
		t.Fatal("an old incarnation's leave removed the new one")
	}
}

func TestGroupRegistryAndConsumerRows(t *testing.T) {
	g := newGroupSM(t)
	g.ok(sec, reg("x"))
	if c := g.m.st.Consumers(); len(c) != 1 || c[0].Consumer != "logplayer/x" || c[0].AckedLsn != 0 {
		t.Fatalf("consumers %v, want logplayer/x at 0 (retention waits for its owner)", c)
	}
	if floor, ok := g.m.st.MinConsumerLSN(); !ok || floor != 0 {
		t.Fatalf("floor %d %v", floor, ok)
	}
	g.ok(sec, &logstorepb.Command{Kind: &logstorepb.Command_ReportConsumer{ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: "logplayer/x", AckedLsn: 7}}})
	g.ok(sec, reg("x", "t", "u")) // replace: keeps the consumer row
	if c := g.m.st.Consumers(); c[0].AckedLsn != 7 {
		t.Fatalf("re-register reset the consumer row: %v", c)
	}
	if got := g.m.st.RegisteredTarget("x").Topics; !slices.Equal(got, []string{"t", "u"}) {
		t.Fatalf("topics %v", got)
	}
	r := g.at(sec, unreg("nope"))[0]
	if status.Code(r.Err) != codes.NotFound || apierr.CodeOf(r.Err) != logstorepb.ErrorCode_UNKNOWN_TARGET || apierr.Detail(r.Err).TargetId != "nope" {
		t.Fatalf("unregister unknown: %v", r.Err)
	}
	g.ok(sec, hb("a", "1"))
	g.ok(sec, unreg("x"))
	if len(g.m.st.Consumers()) != 0 || len(g.m.st.RegisteredTargets()) != 0 || len(g.owned("a")) != 0 {
		t.Fatalf("unregister left %v %v %v", g.m.st.Consumers(), g.m.st.RegisteredTargets(), g.owned("a"))
	}
}

func TestGroupTablesFull(t *testing.T) {
	g := newGroupSM(t)
	g.limits = &logstorepb.ApplyLimits{MaxRegisteredTargets: 2, MaxConsumers: 10}
	g.ok(sec, reg("a"), reg("b"))
	wantTableFull(t, "third target", g.at(sec, reg("c"))[0], 2)
	g.ok(sec, reg("a", "other")) // replacing is always allowed
	g.limits = &logstorepb.ApplyLimits{MaxRegisteredTargets: 10, MaxConsumers: 2}
	wantTableFull(t, "consumer row", g.at(sec, reg("c"))[0], 2)
	if len(g.m.st.RegisteredTargets()) != 2 {
		t.Fatal("a refused registration changed the registry")
	}
}

func TestGroupMembersAndGroupsCapped(t *testing.T) {
	g := newGroupSM(t)
	join := func(group, member string) Result {
		return g.at(sec, groupCmd(&logstorepb.GroupCommand{Op: &logstorepb.GroupCommand_Heartbeat{
			Heartbeat: &logstorepb.GroupHeartbeatRequest{Group: group, MemberId: member}}}))[0]
	}
	for i := range maxPlayerGroups {
		if r := join(fmt.Sprintf("g%03d", i), "m"); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	wantTableFull(t, "one group too many", join("extra", "m"), maxPlayerGroups)
	for i := 1; len(g.m.st.group.members) < maxGroupMembers; i++ {
		if r := join("g000", fmt.Sprintf("m%04d", i)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	wantTableFull(t, "one member too many", join("g001", "another"), maxGroupMembers)
	if r := join("g001", "m"); r.Err != nil { // a renewal always fits
		t.Fatal(r.Err)
	}
}

func TestGroupCommandNeedsVersion3(t *testing.T) {
	m, _ := newTestSM()
	m.Apply(1, &logstorepb.Entry{Commands: []*logstorepb.Command{SetClusterVersionCommand(2)}})
	r := m.Apply(2, &logstorepb.Entry{Commands: []*logstorepb.Command{reg("x")}})
	if apierr.CodeOf(r[0].Err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED || len(m.st.RegisteredTargets()) != 0 {
		t.Fatalf("at version 2: %v", r[0].Err)
	}
}

// groupScript is a deterministic mix of every group operation over 20 s
// of log time.
func groupScript() []*logstorepb.Entry {
	var out []*logstorepb.Entry
	members := []string{"a", "b", "c", "d"}
	for i := range 200 {
		ts := int64(i) * sec / 10
		var cmds []*logstorepb.Command
		switch {
		case i%7 == 0:
			cmds = append(cmds, reg(fmt.Sprintf("t%02d", i%23)))
		case i%11 == 0:
			cmds = append(cmds, unreg(fmt.Sprintf("t%02d", (i*3)%23)))
		case i%13 == 0:
			cmds = append(cmds, leave(members[i%4], ""))
		case i%17 == 0:
			cmds = append(cmds, nextEpoch())
		}
		for j, m := range members {
			// d stops heartbeating at 8 s (expires); c restarts at 12 s.
			if (m == "d" && i > 80) || (i+j)%3 != 0 {
				continue
			}
			inc := "1"
			if m == "c" && i >= 120 {
				inc = "2"
			}
			cmds = append(cmds, hb(m, inc))
		}
		out = append(out, &logstorepb.Entry{TimestampUnixNano: ts, Commands: cmds})
	}
	return out
}

// TestGroupDeterministicAndSnapshotRoundTrip: two machines applying the
// same entries, one restored from a snapshot half way, hold byte-identical
// state, and the invariants hold after every entry.
func TestGroupDeterministicAndSnapshotRoundTrip(t *testing.T) {
	a, b := newGroupSM(t), newGroupSM(t)
	script := groupScript()
	for i, e := range script {
		if i == len(script)/2 {
			bytes, err := MarshalState(b.m.st.ToProto())
			if err != nil {
				t.Fatal(err)
			}
			st, err := UnmarshalState(bytes)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := MarshalState(st.ToProto())
			if string(again) != string(bytes) {
				t.Fatal("snapshot round trip changed the state bytes")
			}
			if st.group.earliestExpiry != b.m.st.group.earliestExpiry {
				t.Fatalf("restored earliest expiry %d, want %d", st.group.earliestExpiry, b.m.st.group.earliestExpiry)
			}
			b.m.SetState(st)
		}
		a.at(e.TimestampUnixNano, e.Commands...)
		b.at(e.TimestampUnixNano, e.Commands...)
	}
	sa, _ := MarshalState(a.m.st.ToProto())
	sb, _ := MarshalState(b.m.st.ToProto())
	if string(sa) != string(sb) {
		t.Fatal("states differ after the same entries")
	}
	d := a.m.st.DescribeGroup("g")
	if len(d.Members) == 0 || len(d.Assignments) == 0 || d.Reassignments == 0 {
		t.Fatalf("script exercised too little: %v", d)
	}
	for _, m := range d.Members {
		if m.MemberId == "d" {
			t.Fatal("d stopped heartbeating at 8 s but is still a member at 20 s")
		}
	}
	if p := a.m.st.ToProto(); !proto.Equal(p, b.m.st.ToProto()) || len(p.GroupCounters) != 1 {
		t.Fatalf("proto state differs or no counters: %v", p.GroupCounters)
	}
}

// A leader election longer than the lease stops log time: no entry is
// applied, so no member can renew. The first entry after it must not
// expire the live members (found by TestPlayerGroupUnderFaults: every
// LogStore leader kill reshuffled the whole group). They get half a lease
// to renew; one that does not is expired then.
func TestGroupSurvivesLogTimeStall(t *testing.T) {
	g := newGroupSM(t)
	g.limits = &logstorepb.ApplyLimits{GroupLeaseNanos: 3 * sec}
	g.ok(0, reg("x"), reg("y"), reg("z"), hb("a", "1"), hb("b", "1"), hb("c", "1"))
	g.ok(sec, hb("a", "1"), hb("b", "1"), hb("c", "1"))
	before := map[string][]string{"a": g.owned("a"), "b": g.owned("b"), "c": g.owned("c")}
	_, moves := g.counters()
	// 3.5 s without an entry (every lease ended at 4 s), then the members
	// renew one by one at the new leader, as their retries reach it.
	at := sec + 3500*sec/1000
	g.ok(at, hb("c", "1"))
	g.ok(at+sec/10, hb("a", "1"))
	g.ok(at+2*sec/10, hb("b", "1"))
	for m, want := range before {
		if got := g.owned(m); !slices.Equal(got, want) {
			t.Errorf("after the stall %s owns %v, before %v", m, got, want)
		}
	}
	if _, after := g.counters(); after != moves {
		t.Errorf("the stall moved %d targets", after-moves)
	}
	// A member that does not renew within half a lease of the first entry
	// after the stall is expired: b and c go on, a stops.
	for ts := at + 5*sec/10; ts < at+3*sec; ts += 5 * sec / 10 {
		g.ok(ts, hb("b", "1"), hb("c", "1"))
		if len(g.owned("a")) != 1 {
			t.Fatalf("a lost its target at %v, before its renewal at %v ran out", ts-at, sec/10)
		}
	}
	g.ok(at+3*sec+sec/10, hb("b", "1"), hb("c", "1"))
	if len(g.owned("a")) != 0 || len(g.owned("b"))+len(g.owned("c")) != 3 {
		t.Fatalf("a, silent since the stall, still owns %v", g.owned("a"))
	}
}
