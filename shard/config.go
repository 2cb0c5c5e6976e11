package shard

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// Defaults of Config.
const (
	// DefaultAddr is where Run listens when Config.Addr is empty.
	DefaultAddr = "127.0.0.1:7400"
	// DefaultScanLimit bounds a Scan that asks for no limit, and
	// MaxScanLimit any Scan: a response stays a few MB at most.
	DefaultScanLimit = 1000
	MaxScanLimit     = 10000
	// DefaultWaitAppliedMax bounds a WaitApplied whose caller set no
	// shorter deadline.
	DefaultWaitAppliedMax = 30 * time.Second
	// DefaultLockWait is how long Open waits for another process to release
	// the shard file.
	DefaultLockWait = 5 * time.Second
)

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = errors.New("shard: invalid config")

// Config configures a shard.
type Config struct {
	// Dir holds the shard's bbolt file (FileName); created if missing. Required.
	Dir string
	// ID is the shard's target id (LogPlayer Hello.target_id). Required.
	ID types.TargetID
	// Topics the shard owns; a slice of another topic is refused
	// permanently and each topic starts at offset 0. Default: []string{ID}
	// (shard "shard-3" owns topic "shard-3").
	Topics []string
	// Addr is the listen address of Run. Default DefaultAddr.
	Addr string
	// Logger defaults to slog.Default(); Registerer to a private registry.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// IncarnationID of the target; default random (see target.Config).
	IncarnationID string
	// SkipLSNs: LSNs whose data the operator chose to drop after a
	// permanent refusal (see package target).
	SkipLSNs []types.LSN
	// AdoptLogIdentity: the operator's reset after an OTHER_LOG refusal (the
	// LogStore was restored or recovered): the next Hello's log identity
	// replaces the stored one (see target.Config.AdoptLogIdentity).
	AdoptLogIdentity bool
	// WaitAppliedMax bounds one WaitApplied call. Default DefaultWaitAppliedMax.
	WaitAppliedMax time.Duration
	// LockWait bounds the wait for the file lock. Default DefaultLockWait.
	LockWait time.Duration
	// WrapStore, when set, wraps the shard's bbolt target.Store before the
	// target SDK uses it (the demo's apply recorder, fault injection in
	// tests). The wrapper must keep the target.Store contract.
	WrapStore func(target.Store) target.Store
}

func (c *Config) validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: Dir is empty", ErrInvalidConfig)
	}
	if c.ID == "" {
		return fmt.Errorf("%w: ID is empty", ErrInvalidConfig)
	}
	if c.WaitAppliedMax < 0 || c.LockWait < 0 {
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	if len(c.Topics) == 0 {
		c.Topics = []string{string(c.ID)}
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.WaitAppliedMax == 0 {
		c.WaitAppliedMax = DefaultWaitAppliedMax
	}
	if c.LockWait == 0 {
		c.LockWait = DefaultLockWait
	}
	return nil
}
