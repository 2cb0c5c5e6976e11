package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// The PlayerGroup state (issue #13): the target registry, the members of
// each named LogPlayer group with their leases, and each group's
// assignment of targets to members with fencing tokens.
//
//   - Every group assigns every registered target among its live members
//     (one group in practice; two groups would deliver every target twice,
//     each fenced on its own tokens, which is the operator's choice).
//   - Leases are in log time: a heartbeat applied at entry time t renews
//     the member's lease to t + the entry's GroupLeaseNanos. At the start of
//     every entry, members whose lease ended at or before the entry's time
//     are dropped (cheap: the earliest lease end is kept), so the live
//     members' own heartbeats advance log time and expire the dead ones.
//   - The assignment is sticky (a live member keeps its targets) and
//     balanced by count (every member owns floor(n/k) or ceil(n/k) targets),
//     moving the fewest targets; ties break by id, so every replica decides
//     the same.
//   - Every change of owner takes a new token from the epoch counter
//     (st.epoch, what NextEpoch increments), so a token exceeds every
//     earlier epoch and token. The player sends it as its Hello epoch.

// TargetConsumerPrefix names a registered target's delivery consumer:
// "logplayer/"+id, the same as logplayer.ConsumerName (kept equal by
// logstore's tests; this package may not import the player).
const TargetConsumerPrefix = "logplayer/"

// DefaultGroupLeaseNanos is the lease length when an entry stamps none:
// 3 s of log time (see logstore.DefaultGroupLease).
const DefaultGroupLeaseNanos = 3_000_000_000

// legacyMaxRegisteredTargets is the registry cap when an entry stamps none.
const legacyMaxRegisteredTargets = 10000

// maxGroupMembers bounds the members of all groups together (a constant of
// apply: changing it changes what apply does, so it needs a new cluster
// version). A heartbeat of a new member beyond it is refused (TABLE_FULL).
const maxGroupMembers = 1024

// maxPlayerGroups bounds the named groups (a group's counters outlive its
// members so its generation never goes back; the cap keeps a player
// inventing group names from growing the state without bound). An apply
// constant like maxGroupMembers.
const maxPlayerGroups = 256

// memberKey names one member of one group; assignKey one target's row in
// one group.
type memberKey struct{ group, member string }
type assignKey struct{ group, target string }

// compare orders keys by group, then member: the order of the snapshot's
// GroupMembers.
func (a memberKey) compare(b memberKey) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.member, b.member))
}

// compare orders keys by group, then target: the order of the snapshot's
// GroupAssignments.
func (a assignKey) compare(b assignKey) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.target, b.target))
}

// groupState is the PlayerGroup part of State.
type groupState struct {
	targets  map[string]*logstorepb.RegisteredTarget
	members  map[memberKey]*logstorepb.GroupMemberState
	assign   map[assignKey]*logstorepb.GroupAssignmentState
	counters map[string]*logstorepb.GroupCounters
	// earliestExpiry is the lowest lease end of any member (0: no member);
	// derived, rebuilt on restore.
	earliestExpiry int64
}

func newGroupState() groupState {
	return groupState{
		targets:  map[string]*logstorepb.RegisteredTarget{},
		members:  map[memberKey]*logstorepb.GroupMemberState{},
		assign:   map[assignKey]*logstorepb.GroupAssignmentState{},
		counters: map[string]*logstorepb.GroupCounters{},
	}
}

// TargetConsumer is the delivery consumer name of target id.
func TargetConsumer(id string) string { return TargetConsumerPrefix + id }

// applyGroup applies one GroupCommand at log time ts.
func (m *Machine) applyGroup(ts int64, c *logstorepb.GroupCommand) Result {
	switch op := c.Op.(type) {
	case *logstorepb.GroupCommand_RegisterTarget:
		return m.registerTarget(ts, op.RegisterTarget)
	case *logstorepb.GroupCommand_UnregisterTarget:
		return m.unregisterTarget(ts, op.UnregisterTarget)
	case *logstorepb.GroupCommand_Heartbeat:
		return m.heartbeat(ts, op.Heartbeat)
	case *logstorepb.GroupCommand_Leave:
		return m.leave(ts, op.Leave)
	default:
		return Result{Err: apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "logstore: group command with no operation")}
	}
}

// registerTarget adds or replaces a target. A new target gets a consumer
// row at acked LSN 0 when it has none, so retention keeps everything it
// will need until its first owner reports (the byte and age caps still
// bound it); a new target beyond the registry or consumer cap is refused.
func (m *Machine) registerTarget(ts int64, t *logstorepb.RegisteredTarget) Result {
	st, g := m.st, &m.st.group
	old, exists := g.targets[t.Id]
	if !exists {
		if full(len(g.targets), 1, m.lim.MaxRegisteredTargets) {
			return Result{Err: tableFull("registered target", len(g.targets), m.lim.MaxRegisteredTargets)}
		}
		consumer := TargetConsumer(t.Id)
		_, hasRow := st.consumers[consumer]
		if !hasRow && full(len(st.consumers), 1, m.lim.MaxConsumers) {
			return Result{Err: tableFull("consumer", len(st.consumers), m.lim.MaxConsumers)}
		}
		if !hasRow {
			st.consumers[consumer] = 0
		}
	}
	t = proto.Clone(t).(*logstorepb.RegisteredTarget)
	slices.SortFunc(t.Options, func(a, b *logstorepb.Header) int { return strings.Compare(a.Key, b.Key) })
	g.targets[t.Id] = t
	changed := !exists || !proto.Equal(old, t)
	for _, name := range sortedKeys(g.counters) {
		if changed {
			m.rebalance(ts, name, true)
		}
	}
	return Result{Resp: &logstorepb.RegisterTargetResponse{}}
}

// unregisterTarget removes a target from the registry and every group,
// and its consumer row (its floor is no longer anyone's: keeping it would
// pin retention forever).
func (m *Machine) unregisterTarget(ts int64, id string) Result {
	st, g := m.st, &m.st.group
	if _, ok := g.targets[id]; !ok {
		return Result{Err: apierr.New(logstorepb.ErrorCode_UNKNOWN_TARGET, fmt.Sprintf("no registered target %q", id),
			func(d *logstorepb.ErrorDetail) { d.TargetId = id })}
	}
	delete(g.targets, id)
	delete(st.consumers, TargetConsumer(id))
	for _, name := range sortedKeys(g.counters) {
		_, owned := g.assign[assignKey{name, id}]
		delete(g.assign, assignKey{name, id})
		m.rebalance(ts, name, owned)
	}
	return Result{Resp: &logstorepb.UnregisterTargetResponse{}}
}

// unregisteredTarget refuses (UNKNOWN_TARGET) a report for consumer
// "logplayer/<id>" when the cluster runs player groups (a group's counters
// exist) and id is not registered: a late report after `target remove`
// (issue #26) must not bring back the row unregisterTarget deleted and
// pin retention. Without player groups a single LogPlayer reports the
// targets of its own configuration, which the registry does not hold. From
// AdmissionVersion on (before it such a report was taken).
func (m *Machine) unregisteredTarget(consumer string) error {
	g := &m.st.group
	id, ok := strings.CutPrefix(consumer, TargetConsumerPrefix)
	if !ok || len(g.counters) == 0 || g.targets[id] != nil || m.st.ClusterVersion() < AdmissionVersion {
		return nil
	}
	return apierr.New(logstorepb.ErrorCode_UNKNOWN_TARGET,
		fmt.Sprintf("consumer %q: target %q is not registered (removed?): its delivery consumer is not kept", consumer, id),
		func(d *logstorepb.ErrorDetail) { d.TargetId = id })
}

// heartbeat joins or renews a member. A row with another incarnation is
// the old process's: it leaves (its targets move, with new tokens) and
// the new incarnation joins. Only a join rebalances.
func (m *Machine) heartbeat(ts int64, h *logstorepb.GroupHeartbeatRequest) Result {
	g := &m.st.group
	key := memberKey{h.Group, h.MemberId}
	row := g.members[key]
	if row != nil && row.Incarnation != h.Incarnation {
		m.dropMember(key)
		row = nil
	}
	joined := row == nil
	if joined {
		if full(len(g.members), 1, maxGroupMembers) {
			return Result{Err: tableFull("group member", len(g.members), maxGroupMembers)}
		}
		if g.counters[h.Group] == nil && full(len(g.counters), 1, maxPlayerGroups) {
			return Result{Err: tableFull("player group", len(g.counters), maxPlayerGroups)}
		}
		row = &logstorepb.GroupMemberState{Group: h.Group, MemberId: h.MemberId, Incarnation: h.Incarnation, JoinedUnixNano: ts}
		g.members[key] = row
		if g.counters[h.Group] == nil {
			g.counters[h.Group] = &logstorepb.GroupCounters{Group: h.Group}
		}
	}
	row.AdminAddress = h.AdminAddress
	row.LeaseExpiresUnixNano = ts + m.lim.GroupLeaseNanos
	if joined {
		// A plain renewal changes no membership: the assignment is already
		// what rebalance would compute (every membership and registry
		// change rebalances, and rebalance moves nothing on a settled
		// assignment), so it is not run. Same output as running it, so no
		// cluster version is needed.
		m.rebalance(ts, h.Group, false)
	}
	g.recomputeExpiry()
	return Result{Resp: &logstorepb.GroupHeartbeatResponse{
		LogTimeUnixNano:      ts,
		LeaseExpiresUnixNano: row.LeaseExpiresUnixNano,
		LeaseNanos:           m.lim.GroupLeaseNanos,
		Assignments:          m.st.GroupAssignments(h.Group, h.MemberId),
		Generation:           g.counters[h.Group].Generation,
	}}
}

// leave ends a member's lease now. Leaving as an unknown member, or with an
// incarnation other than the row's (an old process), changes nothing.
func (m *Machine) leave(ts int64, l *logstorepb.LeaveGroupRequest) Result {
	g := &m.st.group
	key := memberKey{l.Group, l.MemberId}
	if row := g.members[key]; row != nil && (l.Incarnation == "" || l.Incarnation == row.Incarnation) {
		m.dropMember(key)
		m.rebalance(ts, l.Group, false)
		g.recomputeExpiry()
	}
	return Result{Resp: &logstorepb.LeaveGroupResponse{}}
}

// dropMember removes a member's row and releases its assignment rows
// (member cleared, so a new incarnation with the same id does not inherit
// them); the rebalance that follows moves them, counted as reassignments.
func (m *Machine) dropMember(key memberKey) {
	g := &m.st.group
	delete(g.members, key)
	for k, row := range g.assign { // order-free: clears rows only
		if k.group == key.group && row.MemberId == key.member {
			row.MemberId = ""
		}
	}
}

// expireGroupMembers drops every member whose lease ended at or before ts
// and rebalances their groups. Called at the start of every entry.
func (m *Machine) expireGroupMembers(ts int64) {
	g := &m.st.group
	if g.earliestExpiry == 0 || ts < g.earliestExpiry {
		return
	}
	var groups []string
	for k, row := range g.members { // order-free: deletes, then sorted groups
		if row.LeaseExpiresUnixNano <= ts {
			delete(g.members, k)
			groups = append(groups, k.group)
		}
	}
	slices.Sort(groups)
	for _, name := range slices.Compact(groups) {
		m.rebalance(ts, name, false)
	}
	g.recomputeExpiry()
}

// graceAfterStall extends every lease to at least ts + lease/2 when no
// entry was applied for more than half a lease before ts (prev is the
// previous entry's log time). Log time moves only with entries: during a
// leader election (or while the cluster is idle with every member gone)
// no member can renew, and expiring them on the first entry after the
// stall would reassign every target of a live group after each slow
// election. A live member renews every lease/3 and so within the grace; a
// dead one is expired half a lease later than without the stall.
// Extending a lease in the store is always safe: a player stops
// delivering at its own local deadline (send time + lease - margin),
// never later because the store waited longer.
func (m *Machine) graceAfterStall(prev, ts int64) {
	g, lease := &m.st.group, m.lim.GroupLeaseNanos
	if len(g.members) == 0 || prev == 0 || ts-prev <= lease/2 {
		return
	}
	floor := ts + lease/2
	for _, row := range g.members { // order-free: each row on its own
		row.LeaseExpiresUnixNano = max(row.LeaseExpiresUnixNano, floor)
	}
	g.recomputeExpiry()
}

func (g *groupState) recomputeExpiry() {
	g.earliestExpiry = 0
	for _, row := range g.members {
		if g.earliestExpiry == 0 || row.LeaseExpiresUnixNano < g.earliestExpiry {
			g.earliestExpiry = row.LeaseExpiresUnixNano
		}
	}
}

// rebalance recomputes group's assignment at log time ts: rows of dead
// members or unregistered targets are released; each live member keeps
// its targets up to its quota (floor or ceil of targets/members; the
// members holding the most get the ceil slots, ties by id), keeping the
// smallest ids; released and new targets (by id) go to the member with the
// fewest targets and room (ties by id), each with a new token. changed
// forces a generation bump (a target's definition changed).
func (m *Machine) rebalance(ts int64, group string, changed bool) {
	st, g := m.st, &m.st.group
	ctr := g.counters[group]
	if ctr == nil {
		return
	}
	m.rebalances++
	var members []string
	for k := range g.members {
		if k.group == group {
			members = append(members, k.member)
		}
	}
	slices.Sort(members)
	targets := sortedKeys(g.targets)
	// Current owners of live rows; drop the others.
	held := map[string][]string{}
	prev := map[string]bool{} // targets that had an owner row
	for _, t := range targets {
		row := g.assign[assignKey{group, t}]
		if row == nil {
			continue
		}
		prev[t] = true
		if _, live := g.members[memberKey{group, row.MemberId}]; live {
			held[row.MemberId] = append(held[row.MemberId], t)
		}
	}
	for k := range g.assign { // order-free: deletes only
		if k.group != group {
			continue
		}
		if _, reg := g.targets[k.target]; !reg {
			delete(g.assign, k)
			changed = true
		} else if _, live := g.members[memberKey{group, g.assign[k].MemberId}]; !live {
			delete(g.assign, k)
			changed = true
		}
	}
	if len(members) == 0 {
		if changed {
			ctr.Generation++
		}
		return
	}
	// Quotas: the members holding the most get the ceil slots.
	base, extra := len(targets)/len(members), len(targets)%len(members)
	byHeld := slices.Clone(members)
	slices.SortStableFunc(byHeld, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(held[b]), len(held[a])), strings.Compare(a, b))
	})
	quota := map[string]int{}
	for i, id := range byHeld {
		quota[id] = base
		if i < extra {
			quota[id]++
		}
	}
	count := map[string]int{}
	var free []string
	for _, id := range members {
		mine := held[id] // sorted (targets is)
		keep := min(len(mine), quota[id])
		count[id] = keep
		for _, t := range mine[keep:] {
			delete(g.assign, assignKey{group, t})
			changed = true
		}
	}
	for _, t := range targets {
		if _, ok := g.assign[assignKey{group, t}]; !ok {
			free = append(free, t)
		}
	}
	for _, t := range free {
		best := ""
		for _, id := range members {
			if count[id] < quota[id] && (best == "" || count[id] < count[best]) {
				best = id
			}
		}
		count[best]++
		st.epoch++
		g.assign[assignKey{group, t}] = &logstorepb.GroupAssignmentState{
			Group: group, TargetId: t, MemberId: best, Token: uint64(st.epoch), AssignedUnixNano: ts,
		}
		if prev[t] {
			ctr.Reassignments++
		}
		changed = true
	}
	if changed {
		ctr.Generation++
	}
}

// Read side (copies, safe to keep after the caller's lock is released).

// RegisteredTargets returns the registry sorted by id.
func (s *State) RegisteredTargets() []*logstorepb.RegisteredTarget {
	out := make([]*logstorepb.RegisteredTarget, 0, len(s.group.targets))
	for _, id := range sortedKeys(s.group.targets) {
		out = append(out, proto.Clone(s.group.targets[id]).(*logstorepb.RegisteredTarget))
	}
	return out
}

// RegisteredTarget returns target id (nil when unknown).
func (s *State) RegisteredTarget(id string) *logstorepb.RegisteredTarget {
	t := s.group.targets[id]
	if t == nil {
		return nil
	}
	return proto.Clone(t).(*logstorepb.RegisteredTarget)
}

// GroupNames returns every group that ever had a member, sorted.
func (s *State) GroupNames() []string { return sortedKeys(s.group.counters) }

// GroupAssignments returns group's assignment sorted by target: every
// registered target, unowned ones with an empty member and token 0; only
// member's when member is not empty. An unknown group has every target
// unowned.
func (s *State) GroupAssignments(group, member string) []*logstorepb.Assignment {
	var out []*logstorepb.Assignment
	for _, id := range sortedKeys(s.group.targets) {
		a := &logstorepb.Assignment{Group: group}
		if row := s.group.assign[assignKey{group, id}]; row != nil {
			a.MemberId, a.Token, a.AssignedUnixNano = row.MemberId, row.Token, row.AssignedUnixNano
		}
		if member != "" && a.MemberId != member {
			continue
		}
		a.Target = proto.Clone(s.group.targets[id]).(*logstorepb.RegisteredTarget)
		out = append(out, a)
	}
	return out
}

// DescribeGroup returns group's members (sorted by id, each with its
// target count), assignment and counters, at the last applied log time.
func (s *State) DescribeGroup(group string) *logstorepb.DescribeGroupResponse {
	out := &logstorepb.DescribeGroupResponse{Group: group, LogTimeUnixNano: s.lastTimestamp,
		Assignments: s.GroupAssignments(group, "")}
	if c := s.group.counters[group]; c != nil {
		out.Generation, out.Reassignments = c.Generation, c.Reassignments
	}
	owned := map[string]uint32{}
	for _, a := range out.Assignments {
		owned[a.MemberId]++
	}
	for _, row := range s.groupMembers(group) {
		out.Members = append(out.Members, &logstorepb.GroupMember{
			MemberId: row.MemberId, AdminAddress: row.AdminAddress, Incarnation: row.Incarnation,
			JoinedUnixNano: row.JoinedUnixNano, LeaseExpiresUnixNano: row.LeaseExpiresUnixNano, Targets: owned[row.MemberId],
		})
	}
	return out
}

// GroupStatuses summarises every group (for Status).
func (s *State) GroupStatuses() []*logstorepb.PlayerGroupStatus {
	var out []*logstorepb.PlayerGroupStatus
	for _, name := range s.GroupNames() {
		c := s.group.counters[name]
		st := &logstorepb.PlayerGroupStatus{Group: name, Generation: c.Generation, Reassignments: c.Reassignments,
			Members: uint32(len(s.groupMembers(name)))}
		for k := range s.group.assign {
			if k.group == name {
				st.OwnedTargets++
			}
		}
		out = append(out, st)
	}
	return out
}

// GroupMemberCount is the number of live members of all groups.
func (s *State) GroupMemberCount() int { return len(s.group.members) }

// GroupReassignments is the sum of every group's reassignments.
func (s *State) GroupReassignments() uint64 {
	var n uint64
	for _, c := range s.group.counters {
		n += c.Reassignments
	}
	return n
}

// groupMembers returns group's member rows sorted by id (shared rows).
func (s *State) groupMembers(group string) []*logstorepb.GroupMemberState {
	var out []*logstorepb.GroupMemberState
	for k, row := range s.group.members {
		if k.group == group {
			out = append(out, row)
		}
	}
	slices.SortFunc(out, func(a, b *logstorepb.GroupMemberState) int { return strings.Compare(a.MemberId, b.MemberId) })
	return out
}

// groupToProto fills out's PlayerGroup fields, sorted (deterministic bytes).
func (s *State) groupToProto(out *logstorepb.FSMState) {
	g := &s.group
	out.RegisteredTargets = s.RegisteredTargets()
	for _, k := range slices.SortedFunc(maps.Keys(g.members), memberKey.compare) {
		out.GroupMembers = append(out.GroupMembers, proto.Clone(g.members[k]).(*logstorepb.GroupMemberState))
	}
	for _, k := range slices.SortedFunc(maps.Keys(g.assign), assignKey.compare) {
		out.GroupAssignments = append(out.GroupAssignments, proto.Clone(g.assign[k]).(*logstorepb.GroupAssignmentState))
	}
	for _, name := range sortedKeys(g.counters) {
		out.GroupCounters = append(out.GroupCounters, proto.Clone(g.counters[name]).(*logstorepb.GroupCounters))
	}
}

// groupFromProto restores the PlayerGroup fields of p into s.
func (s *State) groupFromProto(p *logstorepb.FSMState) error {
	g := &s.group
	for _, t := range p.RegisteredTargets {
		if t.Id == "" {
			return fmt.Errorf("%w: registered target with no id", ErrCorruptState)
		}
		g.targets[t.Id] = t
	}
	for _, row := range p.GroupMembers {
		g.members[memberKey{row.Group, row.MemberId}] = row
	}
	for _, row := range p.GroupAssignments {
		if row.Token == 0 || row.MemberId == "" || types.Epoch(row.Token) > s.epoch {
			return fmt.Errorf("%w: group %q target %q assignment has no owner or a token 0 or above the epoch", ErrCorruptState, row.Group, row.TargetId)
		}
		g.assign[assignKey{row.Group, row.TargetId}] = row
	}
	for _, c := range p.GroupCounters {
		g.counters[c.Group] = c
	}
	g.recomputeExpiry()
	return nil
}
