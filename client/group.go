package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// PlayerGroup admin calls (issue #13): the target registry and the group
// views, all on the leader (the reads too, so they show every write the
// caller saw committed).

// onLeader runs read on the leader: it asks the node's status first and
// redirects (NOT_LEADER) when the node is a follower, so a read after a
// write sees it (a follower may not have applied it yet).
func onLeader[T any](ctx context.Context, c *Client, read func(ctx context.Context, pg logstorepb.PlayerGroupClient) (T, error)) (T, error) {
	return callRPC(ctx, c, true, func(ctx context.Context, cc *grpc.ClientConn) (T, error) {
		if _, err := leaderStatus(ctx, cc); err != nil {
			var none T
			return none, err
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
	return onLeader(ctx, c, func(ctx context.Context, pg logstorepb.PlayerGroupClient) (*logstorepb.ListRegisteredTargetsResponse, error) {
		return pg.ListRegisteredTargets(ctx, &logstorepb.ListRegisteredTargetsRequest{Group: group})
	})
}

// DescribeGroup returns group's members, leases and assignments.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*logstorepb.DescribeGroupResponse, error) {
	return onLeader(ctx, c, func(ctx context.Context, pg logstorepb.PlayerGroupClient) (*logstorepb.DescribeGroupResponse, error) {
		return pg.DescribeGroup(ctx, &logstorepb.DescribeGroupRequest{Group: group})
	})
}
