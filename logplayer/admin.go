package logplayer

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
)

// AdminServer serves the PlayerAdmin gRPC service (proto/player.proto) for
// a Player. Register it on the LogPlayer's admin grpc.Server.
type AdminServer struct {
	playerpb.UnimplementedPlayerAdminServer
	p *Player
}

var _ playerpb.PlayerAdminServer = (*AdminServer)(nil)

// NewAdminServer returns the admin service of p.
func NewAdminServer(p *Player) *AdminServer { return &AdminServer{p: p} }

// Register registers the service on gs.
func (a *AdminServer) Register(gs grpc.ServiceRegistrar) { playerpb.RegisterPlayerAdminServer(gs, a) }

// AddTarget implements playerpb.PlayerAdminServer.
func (a *AdminServer) AddTarget(ctx context.Context, req *playerpb.AddTargetRequest) (*playerpb.AddTargetResponse, error) {
	if req.Target == nil {
		return nil, adminError(codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT, "target is missing")
	}
	tc := TargetConfig{ID: req.Target.Id, Address: req.Target.Address, Topics: req.Target.Topics}
	if err := a.p.AddTarget(ctx, tc); err != nil {
		return nil, adminStatus(err)
	}
	return &playerpb.AddTargetResponse{}, nil
}

// RemoveTarget implements playerpb.PlayerAdminServer.
func (a *AdminServer) RemoveTarget(ctx context.Context, req *playerpb.RemoveTargetRequest) (*playerpb.RemoveTargetResponse, error) {
	if err := a.p.RemoveTarget(ctx, req.Id); err != nil {
		return nil, adminStatus(err)
	}
	return &playerpb.RemoveTargetResponse{}, nil
}

// ListTargets implements playerpb.PlayerAdminServer.
func (a *AdminServer) ListTargets(context.Context, *playerpb.ListTargetsRequest) (*playerpb.ListTargetsResponse, error) {
	resp := &playerpb.ListTargetsResponse{PlayerId: a.p.cfg.PlayerID, Epoch: uint64(a.p.Epoch()), CurrentLsn: uint64(a.p.CurrentLSN())}
	for _, s := range a.p.Targets() {
		resp.Targets = append(resp.Targets, &playerpb.TargetStatus{
			Config:          &playerpb.TargetConfig{Id: s.ID, Address: s.Address, Topics: s.Topics},
			State:           s.State,
			Term:            uint64(s.Term),
			Connected:       s.Connected,
			Blocked:         s.Blocked,
			LastError:       s.LastError,
			IncarnationId:   s.Incarnation,
			LastAckLsn:      uint64(s.LastAck),
			CurrentLsn:      uint64(s.CurrentLSN),
			LagEntries:      s.LagEntries,
			LagSeconds:      s.LagSeconds,
			NormalDepth:     uint64(s.NormalDepth),
			CatchupDepth:    uint64(s.CatchupDepth),
			NormalBytes:     uint64(s.NormalBytes),
			CatchupBytes:    uint64(s.CatchupBytes),
			InflightBatches: uint64(s.InFlightBatches),
			InflightBytes:   uint64(s.InFlightBytes),
			Returns:         s.Returns,
			Suspends:        s.Suspends,
			SlowSuspends:    s.SlowSuspends,
			StaleTermDrops:  s.StaleDrops,
			ProgressEntries: s.ProgressMarkers,
			Epoch:           uint64(s.HelloEpoch),
		})
	}
	if g, ok := a.p.Group(); ok {
		resp.Group = &playerpb.PlayerGroupStatus{
			Group: g.Group, MemberId: g.MemberID, Incarnation: g.Incarnation,
			LeaseRemainingNanos: int64(g.LeaseRemaining), LeaseNanos: int64(g.Lease), Generation: g.Generation,
			Renewals: g.Renewals, Lapses: g.Lapses, TargetsGained: g.Gained, TargetsLost: g.Lost, LastError: g.LastError,
		}
	}
	return resp, nil
}

// adminStatus maps the Player's errors to gRPC statuses (the one place).
func adminStatus(err error) error {
	switch {
	case errors.Is(err, ErrInvalidConfig):
		return adminError(codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT, err.Error())
	case errors.Is(err, ErrDuplicateTarget):
		return adminError(codes.AlreadyExists, logstorepb.ErrorCode_INVALID_ARGUMENT, err.Error())
	case errors.Is(err, ErrUnknownTarget):
		return adminError(codes.NotFound, logstorepb.ErrorCode_INVALID_ARGUMENT, err.Error())
	case errors.Is(err, ErrGroupManaged):
		return adminError(codes.FailedPrecondition, logstorepb.ErrorCode_INVALID_ARGUMENT, err.Error())
	case errors.Is(err, ErrNotRunning):
		return adminError(codes.Unavailable, logstorepb.ErrorCode_SHUTTING_DOWN, err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return adminError(codes.DeadlineExceeded, logstorepb.ErrorCode_TIMEOUT, err.Error())
	}
	return adminError(codes.Internal, logstorepb.ErrorCode_INTERNAL, err.Error())
}

func adminError(c codes.Code, ec logstorepb.ErrorCode, msg string) error {
	st, err := status.New(c, msg).WithDetails(&logstorepb.ErrorDetail{Code: ec})
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}
