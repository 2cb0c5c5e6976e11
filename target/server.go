package target

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/grpcedge"
	"github.com/logplayer/logplayer/internal/grpcwindow"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// gracefulStopMax bounds how long Serve waits for in-flight unary RPCs (such
// as a shard's WaitApplied) after the streams were closed.
const gracefulStopMax = 5 * time.Second

// MaxBatchBytes is the largest encoded DeliverRequest a target built with
// ServerOptions accepts (gRPC's default is 4 MiB). The LogPlayer must keep
// each Batch below it; a larger one fails the stream with RESOURCE_EXHAUSTED.
const MaxBatchBytes = 64 << 20

// ServerOptions are the grpc.ServerOptions a server carrying the Target
// service should use: the receive size limit MaxBatchBytes, the edge's
// codec and interceptors (internal/grpcedge) so bytes that are not a valid
// request answer INVALID_ARGUMENT with an ErrorDetail, and fixed flow-control
// windows (internal/grpcwindow): with grpc-go's dynamic ones a Batch above
// the 64 KiB starting window waits for a window update, and every Batch
// costs a bandwidth-estimator PING.
func ServerOptions() []grpc.ServerOption {
	return append(append(grpcedge.ServerOptions(), grpcwindow.ServerOptions()...), grpc.MaxRecvMsgSize(MaxBatchBytes))
}

// Server runs the Target service for one Store. Create it with NewServer,
// register it on a *grpc.Server with Register (or use Serve), and Close it.
type Server struct {
	targetpb.UnimplementedTargetServer

	cfg   Config
	log   *slog.Logger
	m     *metrics
	check checker

	queue       chan *item   // receivers -> applier; capacity queueBatches
	queued      *queueBudget // the byte bound of queue (Config.MaxQueueBytes)
	quit        chan struct{}
	applierDone chan struct{}

	mu struct {
		sync.Mutex
		closed   bool
		streamID uint64
	}
	streams sync.WaitGroup // Deliver handlers and their receivers

	// ap is owned by the applier goroutine.
	ap struct {
		st      State         // the Store's durable State
		stale   bool          // st must be reloaded with Store.State before use
		active  *stream       // the stream allowed to deliver, or nil
		session types.Session // highest Hello session seen in the current epoch
	}
}

var _ targetpb.TargetServer = (*Server)(nil)

// NewServer loads the Store's State and starts the applier goroutine.
// Close stops it.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, string(cfg.TargetID))
	if err != nil {
		return nil, fmt.Errorf("target: metrics: %w", err)
	}
	st, err := cfg.Store.State()
	if err != nil {
		return nil, fmt.Errorf("target %s: load state: %w", cfg.TargetID, err)
	}
	s := &Server{
		cfg:         cfg,
		log:         cfg.Logger.With("target", cfg.TargetID),
		m:           m,
		queue:       make(chan *item, queueBatches),
		queued:      newQueueBudget(cfg.MaxQueueBytes, m.queueBytes),
		quit:        make(chan struct{}),
		applierDone: make(chan struct{}),
	}
	if len(cfg.Topics) > 0 {
		s.check.topics = map[string]bool{}
		for _, t := range cfg.Topics {
			s.check.topics[t] = true
		}
	}
	if len(cfg.SkipLSNs) > 0 {
		s.check.skip = map[types.LSN]bool{}
		for _, lsn := range cfg.SkipLSNs {
			s.check.skip[lsn] = true
			s.log.Warn("operator skip: the data of this LSN will be dropped", "lsn", lsn)
		}
	}
	s.setState(st.Clone())
	s.log.Info("target ready", "lsn", st.AppliedLSN, "epoch", st.Epoch, "incarnation", cfg.IncarnationID)
	go s.runApplier()
	return s, nil
}

// Register registers the Target service on gs.
func (s *Server) Register(gs grpc.ServiceRegistrar) {
	targetpb.RegisterTargetServer(gs, s)
}

// IncarnationID is the id sent in every HelloAck of this Server.
func (s *Server) IncarnationID() string { return s.cfg.IncarnationID }

// Close ends every stream with UNAVAILABLE (SHUTTING_DOWN), lets a running
// Apply finish, stops the applier and waits for the Deliver handlers, at
// most Config.CloseTimeout: a handler blocked in Send to a caller that
// stopped reading returns only when the gRPC server stops (Serve does) or the
// connection breaks, and it no longer touches the Store. Later Deliver calls
// are refused. Close does not close the Store.
func (s *Server) Close() {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.applierDone
	done := make(chan struct{})
	go func() { // ends when the last handler returns, perhaps after Close
		s.streams.Wait()
		close(done)
	}()
	timer := time.NewTimer(s.cfg.CloseTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.log.Warn("close: Deliver handlers still blocked in Send to callers that stopped reading; "+
			"they end when the gRPC server stops", "waited", s.cfg.CloseTimeout)
	}
}

// Serve serves gs (on which s and any other services are registered) on lis
// until ctx is done, then closes s (ending its streams) and stops gs
// gracefully, forcing it after gracefulStopMax. It returns nil after a
// shutdown caused by ctx, or the error that stopped gs.Serve.
func Serve(ctx context.Context, gs *grpc.Server, lis net.Listener, s *Server) error {
	served := make(chan error, 1) // written once by the Serve goroutine
	go func() { served <- gs.Serve(lis) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	s.Close()
	grpcedge.StopGracefully(gs, gracefulStopMax)
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

var errShuttingDown = refuse("", logstorepb.ErrorCode_SHUTTING_DOWN, nil, "target is shutting down")

// setState installs st as the applier's State and publishes it in metrics.
// Applier goroutine (or NewServer before it starts).
func (s *Server) setState(st State) {
	s.ap.st = st
	s.m.appliedLSN.Set(float64(st.AppliedLSN))
	s.m.epoch.Set(float64(st.Epoch))
}

// countRefusal records a refusal in metrics and logs.
func (s *Server) countRefusal(st *stream, r *refusal) {
	if r.reason == "" {
		return
	}
	s.m.refusals.WithLabelValues(r.reason).Inc()
	args := []any{"reason", r.reason, "err", r.msg}
	if st != nil && st.hello != nil {
		args = append(args, "epoch", st.hello.Epoch, "session", st.hello.Session, "player", st.hello.PlayerId)
	}
	if r.detail.Lsn != 0 {
		args = append(args, "lsn", r.detail.Lsn)
	}
	s.log.Warn("target refused", args...)
}

// NewServerFor is NewServer for a store a role has just opened: on an
// error it calls closeStore, so the store is not left open; closeAll ends
// the server's streams and then calls closeStore (what a role's serving
// calls at Stop, serve.StartTarget's closeFn).
func NewServerFor(cfg Config, closeStore func() error) (srv *Server, closeAll func() error, err error) {
	srv, err = NewServer(cfg)
	if err != nil {
		_ = closeStore()
		return nil, nil, err
	}
	return srv, func() error {
		srv.Close()
		return closeStore()
	}, nil
}
