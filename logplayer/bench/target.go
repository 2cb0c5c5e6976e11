package bench

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// benchTarget is one target of a row, in this process (localTarget) or in a
// child process (procTarget).
type benchTarget interface {
	address() string
	// drain waits until the target applied lsn, then adds its timing events
	// to rec (a local target recorded them there already).
	drain(ctx context.Context, lsn types.LSN, rec *recorder) error
	// applied is the target's applied LSN (in-process targets only; a
	// child process's answers 0).
	applied() types.LSN
	close()
}

// localTarget is a target served on loopback in this process with the
// timing hooks: a reference shard, or (MemoryTargets) the target SDK on a
// memStore.
type localTarget struct {
	sh   *shard.Shard   // nil for a memory target
	srv  *target.Server // the memory target's server
	mem  *memStore
	gs   *grpc.Server
	addr string
}

var _ benchTarget = (*localTarget)(nil)

// startLocalTarget starts target id with its data under dir; its timing
// events go to rec.
func startLocalTarget(dir, id string, memory bool, rec *recorder, cfg Config) (*localTarget, error) {
	bs := &localTarget{}
	wrap := func(s target.Store) target.Store { return &timedStore{Store: s, rec: rec} }
	var register func(grpc.ServiceRegistrar)
	if memory {
		bs.mem = newMemStore()
		srv, err := target.NewServer(target.Config{TargetID: types.TargetID(id), Store: wrap(bs.mem), Topics: []string{id},
			Logger: cfg.Logger, Registerer: prometheus.NewRegistry()})
		if err != nil {
			return nil, err
		}
		bs.srv, register = srv, srv.Register
	} else {
		sh, err := shard.Open(shard.Config{
			Dir: dir, ID: types.TargetID(id), Logger: cfg.Logger, Registerer: prometheus.NewRegistry(), WrapStore: wrap,
		})
		if err != nil {
			return nil, err
		}
		bs.sh, register = sh, sh.Register
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		bs.closeTarget()
		return nil, err
	}
	opts := append(target.ServerOptions(),
		grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &recvTimer{ServerStream: ss, rec: rec})
		}),
	)
	if cfg.Security != nil {
		opts = append(opts, cfg.Security.ServerOptions...)
	}
	gs := grpc.NewServer(opts...)
	register(gs)
	go func() { _ = gs.Serve(lis) }()
	bs.gs, bs.addr = gs, lis.Addr().String()
	return bs, nil
}

func (s *localTarget) address() string { return s.addr }

func (s *localTarget) drain(ctx context.Context, lsn types.LSN, _ *recorder) error {
	return s.waitApplied(ctx, lsn)
}

func (s *localTarget) applied() types.LSN {
	if s.sh != nil {
		return s.sh.AppliedLSN()
	}
	return s.mem.applied()
}

func (s *localTarget) close() {
	s.gs.Stop()
	s.closeTarget()
}

func (s *localTarget) closeTarget() {
	if s.sh != nil {
		_ = s.sh.Close()
	} else {
		s.srv.Close()
	}
}

// waitApplied waits until the target applied lsn.
func (s *localTarget) waitApplied(ctx context.Context, lsn types.LSN) error {
	if s.sh != nil {
		_, err := s.sh.WaitApplied(ctx, lsn)
		return err
	}
	for s.mem.applied() < lsn {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// memStore is a target.Store that keeps only its State (no data, no disk).
type memStore struct {
	mu sync.Mutex
	st target.State
}

func newMemStore() *memStore { return &memStore{st: target.State{Topics: map[string]types.Offset{}}} }

func (m *memStore) State() (target.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.Clone(), nil
}

func (m *memStore) Apply(_ []*targetpb.Delivery, next target.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = next.Clone()
	return nil
}

func (m *memStore) applied() types.LSN {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.AppliedLSN
}

// recvTimer notes, for each Batch the target receives, the dispatch and
// receive time of its transactions (progress markers excluded).
type recvTimer struct {
	grpc.ServerStream
	rec *recorder
}

func (r *recvTimer) RecvMsg(m any) error {
	if err := r.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	if req, ok := m.(*targetpb.DeliverRequest); ok && req.GetBatch() != nil {
		b := req.GetBatch()
		for _, d := range b.Deliveries {
			if sent, ok := sentAt(d); ok {
				r.rec.received(sent, b.DispatchedUnixNano, now)
			}
		}
	}
	return nil
}

// timedStore notes when the shard's Apply returned (durable) for each
// transaction it applied.
type timedStore struct {
	target.Store
	rec *recorder
}

func (s *timedStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	if err := s.Store.Apply(ds, next); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	for _, d := range ds {
		if sent, ok := sentAt(d); ok {
			s.rec.applied(sent, now)
		}
	}
	return nil
}

// sentAt returns the Append call time a delivery carries (progress markers
// carry none).
func sentAt(d *targetpb.Delivery) (int64, bool) {
	if len(d.Slices) == 0 || len(d.Slices[0].Messages) == 0 {
		return 0, false
	}
	for _, h := range d.Slices[0].Messages[0].Headers {
		if h.Key == sentHeader && len(h.Value) == 8 {
			return int64(binary.BigEndian.Uint64(h.Value)), true
		}
	}
	return 0, false
}

// recorder collects the timing events of a row's targets, all in Unix
// nanoseconds of this machine's wall clock (comparable across processes).
type recorder struct {
	mu    sync.Mutex
	recv  []recvEvent
	apply []applyEvent
}

// recvEvent: a target received a delivery of the transaction appended at
// sent, dispatched by the LogPlayer at dispatched.
type recvEvent struct{ sent, dispatched, received int64 }

// applyEvent: a target's Apply of the transaction appended at sent returned.
type applyEvent struct{ sent, applied int64 }

func (r *recorder) received(sent, dispatched, at int64) {
	r.mu.Lock()
	r.recv = append(r.recv, recvEvent{sent, dispatched, at})
	r.mu.Unlock()
}

func (r *recorder) applied(sent, at int64) {
	r.mu.Lock()
	r.apply = append(r.apply, applyEvent{sent, at})
	r.mu.Unlock()
}

// take returns the events recorded so far and forgets them.
func (r *recorder) take() ([]recvEvent, []applyEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	recv, apply := r.recv, r.apply
	r.recv, r.apply = nil, nil
	return recv, apply
}

func (r *recorder) add(recv []recvEvent, apply []applyEvent) {
	r.mu.Lock()
	r.recv = append(r.recv, recv...)
	r.apply = append(r.apply, apply...)
	r.mu.Unlock()
}

// stats returns the LogPlayer and apply delays of the transactions whose
// Append call time lies in [from, to).
func (r *recorder) stats(from, to int64) (player, apply Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := func(sent int64) bool { return sent >= from && sent < to }
	var p, a []time.Duration
	for _, e := range r.recv {
		if in(e.sent) {
			p = append(p, time.Duration(e.received-e.dispatched))
		}
	}
	for _, e := range r.apply {
		if in(e.sent) {
			a = append(a, time.Duration(e.applied-e.sent))
		}
	}
	return statsOf(p), statsOf(a)
}

// statsOf summarises d (sorting it) by quantile.Summarize.
func statsOf(d []time.Duration) Stats {
	s := quantile.Summarize(d)
	return Stats{N: s.N, Avg: s.Avg, P50: s.P50, P99: s.P99}
}
