package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// PlayerGroup admin calls (issue #13): the target registry and the group
// views, all on the leader (the reads too, so they show every write the
// caller saw committed).

// onLeader runs read on the leader: it asks the node's status first and
// redirects (NOT_LEADER) when the node is a follower, so a read after a
// write sees it (a follower may not have applied it yet).
func (c *Client) onLeader(ctx context.Context, read func(ctx context.Context, pg logstorepb.PlayerGroupClient) error) error {
	return c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		st, err := logstorepb.NewLogStoreClient(cc).Status(ctx, &logstorepb.StatusRequest{})
		if err != nil {
			return err
		}
		if st.Role != "leader" {
			return apierr.New(logstorepb.ErrorCode_NOT_LEADER, "not the leader", func(d *logstorepb.ErrorDetail) {
				d.LeaderId, d.LeaderAddress = st.LeaderId, st.LeaderAddress
			})
		}
		return read(ctx, logstorepb.NewPlayerGroupClient(cc))
	})
}

// RegisterTarget adds t to the target registry or replaces the target with
// its id (idempotent: retried on an unknown outcome).
func (c *Client) RegisterTarget(ctx context.Context, t *logstorepb.RegisteredTarget) error {
	return c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := logstorepb.NewPlayerGroupClient(cc).RegisterTarget(ctx, &logstorepb.RegisterTargetRequest{Target: t})
		return err
	})
}

// UnregisterTarget removes target id (NOT_FOUND UNKNOWN_TARGET when it is
// not registered). Not retried on an unknown outcome: a retry of a
// committed removal would report UNKNOWN_TARGET.
func (c *Client) UnregisterTarget(ctx context.Context, id string) error {
	return c.call(ctx, false, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := logstorepb.NewPlayerGroupClient(cc).UnregisterTarget(ctx, &logstorepb.UnregisterTargetRequest{Id: id})
		return err
	})
}

// ListRegisteredTargets returns the registry and the assignments of group
// (every group when empty).
func (c *Client) ListRegisteredTargets(ctx context.Context, group string) (*logstorepb.ListRegisteredTargetsResponse, error) {
	var out *logstorepb.ListRegisteredTargetsResponse
	err := c.onLeader(ctx, func(ctx context.Context, pg logstorepb.PlayerGroupClient) error {
		resp, err := pg.ListRegisteredTargets(ctx, &logstorepb.ListRegisteredTargetsRequest{Group: group})
		out = resp
		return err
	})
	return out, err
}

// DescribeGroup returns group's members, leases and assignments.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*logstorepb.DescribeGroupResponse, error) {
	var out *logstorepb.DescribeGroupResponse
	err := c.onLeader(ctx, func(ctx context.Context, pg logstorepb.PlayerGroupClient) error {
		resp, err := pg.DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{Group: group})
		out = resp
		return err
	})
	return out, err
}
