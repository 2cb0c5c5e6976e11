package shard

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// Shard is an open shard: its bbolt store, the Target service that applies
// deliveries to it and the Shard read service.
type Shard struct {
	cfg    Config
	store  *store
	target *target.Server
}

// Open opens (or creates) the shard in cfg.Dir and starts its target applier.
// Close releases both.
func Open(cfg Config) (*Shard, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := openStore(cfg.Dir, cfg.Topics, cfg.LockWait)
	if err != nil {
		return nil, err
	}
	var ts target.Store = st
	if cfg.WrapStore != nil {
		ts = cfg.WrapStore(st)
	}
	srv, err := target.NewServer(target.Config{
		TargetID:         cfg.ID,
		Store:            ts,
		Logger:           cfg.Logger,
		Registerer:       cfg.Registerer,
		IncarnationID:    cfg.IncarnationID,
		Topics:           cfg.Topics,
		SkipLSNs:         cfg.SkipLSNs,
		AdoptLogIdentity: cfg.AdoptLogIdentity,
	})
	if err != nil {
		_ = st.close()
		return nil, err
	}
	return &Shard{cfg: cfg, store: st, target: srv}, nil
}

// Register registers the Target and Shard services on gs.
func (s *Shard) Register(gs grpc.ServiceRegistrar) {
	s.target.Register(gs)
	shardpb.RegisterShardServer(gs, &service{s: s})
}

// Serve serves both services on lis until ctx is done, then ends the
// delivery streams and stops gracefully. It does not Close the shard.
func (s *Shard) Serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer(target.ServerOptions()...)
	s.Register(gs)
	return target.Serve(ctx, gs, lis, s.target)
}

// Close stops the target (ending its streams) and closes the bbolt file.
func (s *Shard) Close() error {
	s.target.Close()
	return s.store.close()
}

// Run opens the shard, serves it on cfg.Addr until ctx is done, and closes
// it: the whole life of a shard process.
func Run(ctx context.Context, cfg Config) error {
	s, err := Open(cfg)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		_ = s.Close()
		return fmt.Errorf("shard %s: %w", s.cfg.ID, err)
	}
	s.cfg.Logger.Info("shard serving", "target", s.cfg.ID, "addr", lis.Addr().String(), "dir", s.cfg.Dir,
		"lsn", s.AppliedLSN())
	serveErr := s.Serve(ctx, lis)
	if err := s.Close(); err != nil && serveErr == nil {
		serveErr = err
	}
	return serveErr
}

// AppliedLSN is the shard's durable applied LSN.
func (s *Shard) AppliedLSN() types.LSN { return s.store.appliedLSN() }

// WaitApplied waits until the applied LSN is at least lsn (read-your-writes
// after an Append) or ctx is done, and returns the applied LSN.
func (s *Shard) WaitApplied(ctx context.Context, lsn types.LSN) (types.LSN, error) {
	return s.store.waitApplied(ctx, lsn)
}

// Get returns key's value, whether it exists, and the applied LSN the answer
// reflects.
func (s *Shard) Get(key []byte) ([]byte, bool, types.LSN, error) { return s.store.get(key) }

// Scan returns up to limit pairs whose key has prefix, in key order, whether
// it stopped at the limit, and the applied LSN the answer reflects.
func (s *Shard) Scan(prefix []byte, limit int) ([]*shardpb.KeyValue, bool, types.LSN, error) {
	return s.store.scan(prefix, limit)
}
