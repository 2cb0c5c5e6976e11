package api

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// PlayerGroup service (issue #13): the target registry and the LogPlayer
// group membership. Writes are Raft commands (fsm/group.go) submitted by
// the leader (a follower answers NOT_LEADER naming the leader, like every
// write); List and Describe read the node's applied state.

// maxTargetBytes bounds one encoded RegisteredTarget.
const maxTargetBytes = 64 << 10

type groupServer struct {
	logstorepb.UnimplementedPlayerGroupServer
	s *server
	// heartbeatDuration is the Heartbeat RPC latency at the leader (intake
	// to apply result: the lease renewal latency a player sees, minus the
	// network).
	heartbeatDuration *prometheus.HistogramVec
}

func newGroupServer(s *server) *groupServer {
	g := &groupServer{s: s}
	reg := s.cfg.Registry
	labels := prometheus.Labels{"node": s.cfg.ID}
	g.heartbeatDuration = registerOr(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "logstore_group_heartbeat_duration_seconds", Help: "PlayerGroup Heartbeat (lease renewal) latency at the leader, by result code.",
		Buckets: LatencyBuckets, ConstLabels: labels,
	}, []string{"code"}))
	state := func(fn func(st *fsm.State) float64) func() float64 {
		return func() float64 {
			var v float64
			s.node.View(func(st *fsm.State) { v = fn(st) })
			return v
		}
	}
	registerOr(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "logstore_group_reassignments_total", Help: "PlayerGroup changes of a target's owner (member death, leave, join rebalancing) in the applied state, all groups.", ConstLabels: labels,
	}, state(func(st *fsm.State) float64 { return float64(st.GroupReassignments()) })))
	registerOr(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "logstore_group_members", Help: "Live PlayerGroup members (unexpired leases) in the applied state, all groups.", ConstLabels: labels,
	}, state(func(st *fsm.State) float64 { return float64(st.GroupMemberCount()) })))
	registerOr(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "logstore_registered_targets", Help: "Targets in the PlayerGroup registry.", ConstLabels: labels,
	}, state(func(st *fsm.State) float64 { return float64(len(st.RegisteredTargets())) })))
	return g
}

// registerOr registers c, or returns the collector already registered
// under its name (RegisterServices called twice on one node).
func registerOr[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
	}
	return c
}

func groupCommand(c *logstorepb.GroupCommand) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_Group{Group: c}}
}

// submitGroup submits one group command through the leader.
func submitGroup[R proto.Message](ctx context.Context, g *groupServer, c *logstorepb.GroupCommand) (R, error) {
	var zero R
	resp, err := g.s.submit(ctx, groupCommand(c), proto.Size(c))
	if err != nil {
		return zero, err
	}
	return resp.(R), nil
}

func (g *groupServer) RegisterTarget(ctx context.Context, req *logstorepb.RegisterTargetRequest) (*logstorepb.RegisterTargetResponse, error) {
	if err := validateRegisteredTarget(req.Target); err != nil {
		return nil, err
	}
	return submitGroup[*logstorepb.RegisterTargetResponse](ctx, g, &logstorepb.GroupCommand{
		Op: &logstorepb.GroupCommand_RegisterTarget{RegisterTarget: req.Target}})
}

func (g *groupServer) UnregisterTarget(ctx context.Context, req *logstorepb.UnregisterTargetRequest) (*logstorepb.UnregisterTargetResponse, error) {
	if err := validTargetID(req.Id); err != nil {
		return nil, err
	}
	return submitGroup[*logstorepb.UnregisterTargetResponse](ctx, g, &logstorepb.GroupCommand{
		Op: &logstorepb.GroupCommand_UnregisterTarget{UnregisterTarget: req.Id}})
}

func (g *groupServer) Heartbeat(ctx context.Context, req *logstorepb.GroupHeartbeatRequest) (*logstorepb.GroupHeartbeatResponse, error) {
	start := time.Now()
	resp, err := g.heartbeat(ctx, req)
	g.heartbeatDuration.WithLabelValues(status.Code(err).String()).Observe(time.Since(start).Seconds())
	return resp, err
}

func (g *groupServer) heartbeat(ctx context.Context, req *logstorepb.GroupHeartbeatRequest) (*logstorepb.GroupHeartbeatResponse, error) {
	if err := validMember(req.Group, req.MemberId, req.Incarnation); err != nil {
		return nil, err
	}
	if req.AdminAddress != "" {
		if err := validHostPort("admin_address", req.AdminAddress); err != nil {
			return nil, err
		}
	}
	return submitGroup[*logstorepb.GroupHeartbeatResponse](ctx, g, &logstorepb.GroupCommand{
		Op: &logstorepb.GroupCommand_Heartbeat{Heartbeat: req}})
}

func (g *groupServer) LeaveGroup(ctx context.Context, req *logstorepb.LeaveGroupRequest) (*logstorepb.LeaveGroupResponse, error) {
	if err := validMember(req.Group, req.MemberId, req.Incarnation); err != nil {
		return nil, err
	}
	return submitGroup[*logstorepb.LeaveGroupResponse](ctx, g, &logstorepb.GroupCommand{
		Op: &logstorepb.GroupCommand_Leave{Leave: req}})
}

func (g *groupServer) ListRegisteredTargets(_ context.Context, req *logstorepb.ListRegisteredTargetsRequest) (*logstorepb.ListRegisteredTargetsResponse, error) {
	if req.Group != "" {
		if err := ValidName("group", req.Group); err != nil {
			return nil, err
		}
	}
	out := &logstorepb.ListRegisteredTargetsResponse{}
	g.s.node.View(func(st *fsm.State) {
		out.Targets = st.RegisteredTargets()
		groups := []string{req.Group}
		if req.Group == "" {
			groups = st.GroupNames()
		}
		for _, name := range groups {
			out.Assignments = append(out.Assignments, st.GroupAssignments(name, "")...)
		}
	})
	return out, nil
}

func (g *groupServer) DescribeGroup(_ context.Context, req *logstorepb.DescribeGroupRequest) (*logstorepb.DescribeGroupResponse, error) {
	if err := ValidName("group", req.Group); err != nil {
		return nil, err
	}
	var out *logstorepb.DescribeGroupResponse
	g.s.node.View(func(st *fsm.State) { out = st.DescribeGroup(req.Group) })
	// The lease this node would stamp as leader; every node of a cluster
	// runs the same configuration in practice, and a heartbeat response
	// carries the applied one.
	out.LeaseNanos = int64(g.s.cfg.GroupLease)
	return out, nil
}

// Validation at the edge: a refused request writes nothing.

func validTargetID(id string) error {
	if !ValidTopic(id) {
		return InvalidArg("target id %q: want 1..%d characters of [a-zA-Z0-9._-]", id, MaxTopicLen)
	}
	return nil
}

func validMember(group, member, incarnation string) error {
	if err := ValidName("group", group); err != nil {
		return err
	}
	if err := ValidName("member_id", member); err != nil {
		return err
	}
	if len(incarnation) > MaxNameLen {
		return InvalidArg("incarnation must be at most %d bytes, got %d", MaxNameLen, len(incarnation))
	}
	return nil
}

// validHostPort accepts host:port with a non-empty host and a port in
// 1..65535.
func validHostPort(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return InvalidArg("%s %q: want host:port: %v", what, addr, err)
	}
	if p, err := strconv.Atoi(port); host == "" || err != nil || p < 1 || p > 65535 {
		return InvalidArg("%s %q: want host:port with a host and a port in 1..65535", what, addr)
	}
	return nil
}

// validateRegisteredTarget checks a target for RegisterTarget: a valid id,
// host:port, at least one valid topic (no duplicates), no options (the
// field is reserved: no option key is accepted yet, so a typo cannot be
// silently ignored), and a bounded size.
func validateRegisteredTarget(t *logstorepb.RegisteredTarget) error {
	if t == nil {
		return InvalidArg("target is required")
	}
	if err := validTargetID(t.Id); err != nil {
		return err
	}
	if err := validHostPort("address", t.Address); err != nil {
		return err
	}
	if len(t.Topics) == 0 {
		return InvalidArg("target %q: at least one topic is required", t.Id)
	}
	if err := ValidateTopics(t.Topics); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, topic := range t.Topics {
		if seen[topic] {
			return InvalidArg("target %q: topic %q appears twice", t.Id, topic)
		}
		seen[topic] = true
	}
	if len(t.Options) > 0 {
		return InvalidArg("target %q: unknown option %q (no target options are accepted yet)", t.Id, t.Options[0].Key)
	}
	if n := proto.Size(t); n > maxTargetBytes {
		return InvalidArg("target %q: %d bytes encoded, at most %d", t.Id, n, maxTargetBytes)
	}
	return nil
}
