package target

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/types"
)

// Defaults of Config.
const (
	// DefaultMaxGroupDeliveries bounds the deliveries of one group commit:
	// large enough that a slow fsync is amortised over thousands of small
	// transactions, small enough that one local transaction stays short.
	DefaultMaxGroupDeliveries = 4096
	// DefaultMaxGroupBytes bounds the encoded size of the batches of one group
	// commit (the memory one Apply call holds).
	DefaultMaxGroupBytes = 16 << 20
	// DefaultHelloTimeout is how long a new stream may take to send its Hello.
	DefaultHelloTimeout = 30 * time.Second
	// DefaultMaxQueueBytes bounds the encoded bytes of the batches waiting
	// for the applier (queueBudget): twice DefaultMaxGroupBytes, so the next
	// group is ready when an Apply returns, and four of the LogPlayer's
	// default in-flight windows (logplayer.DefaultWindowBytes, 8 MiB).
	DefaultMaxQueueBytes = 2 * DefaultMaxGroupBytes
	// DefaultCloseTimeout bounds how long Close waits for the Deliver
	// handlers to return. A handler blocked in Send to a caller that stopped
	// reading its acks returns only when the gRPC server stops or the
	// connection breaks; Close does not wait for it longer than this.
	DefaultCloseTimeout = 5 * time.Second
)

// queueBatches is the capacity of the applier's intake queue, in batches.
// While one Apply runs, the receiver keeps queueing what the LogPlayer's
// in-flight window allows; 64 batches is more than one window (the
// LogPlayer's DefaultWindowBatches is 32), so the next group is ready when
// the Apply returns. When the queue is full, by count or by bytes
// (Config.MaxQueueBytes, queuebytes.go), the receiver stops reading the
// stream and gRPC flow control pushes back on the LogPlayer.
const queueBatches = 64

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = errors.New("target: invalid config")

// Config configures a Server.
type Config struct {
	// TargetID names this target; a Hello for another id is refused. Required.
	TargetID types.TargetID
	// Store is the application's storage. Required.
	Store Store
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the target_… metrics, labelled target=TargetID.
	// Default: a private registry (metrics are kept but not exported).
	Registerer prometheus.Registerer
	// IncarnationID is sent in every HelloAck; it must change each time the
	// process starts. Default: 16 random hex digits.
	IncarnationID string
	// Topics, when not empty, is the complete set of topics this target
	// accepts: a slice of another topic is refused permanently
	// (APPLY_REJECTED), and a topic never seen must start at offset 0.
	// When empty, any topic is accepted and the first slice of a topic never
	// seen fixes its position (its first offset is accepted as is).
	Topics []string
	// SkipLSNs is the operator's escape hatch after a permanent refusal: the
	// data of these LSNs is dropped (each is applied as a progress marker,
	// its topic offsets still advance) and a warning is logged. See the
	// package doc.
	SkipLSNs []types.LSN
	// AdoptLogIdentity is the operator's explicit reset after a refusal
	// OTHER_LOG (the LogStore was restored or recovered, or the target moved
	// to another cluster): the next Hello's log identity replaces the one in
	// the State, and a warning is logged. Set it only when the target's data
	// is known to match the new log up to its applied LSN (otherwise re-seed
	// the target); unset it once the target has been delivered to again.
	AdoptLogIdentity bool
	// MaxGroupDeliveries and MaxGroupBytes bound one group commit. A single
	// received batch is never split, so a group may exceed them by one batch.
	MaxGroupDeliveries int
	MaxGroupBytes      int
	// HelloTimeout bounds the wait for a new stream's Hello.
	HelloTimeout time.Duration
	// MaxQueueBytes bounds the encoded bytes of the received batches waiting
	// for the applier; a stream beyond it is not read until the applier takes
	// some (one batch of any size is queued when nothing else is). Default
	// DefaultMaxQueueBytes.
	MaxQueueBytes int
	// CloseTimeout bounds how long Close waits for the Deliver handlers.
	// Default DefaultCloseTimeout.
	CloseTimeout time.Duration
	// Now is the clock for delay metrics; defaults to time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.TargetID == "" {
		return fmt.Errorf("%w: TargetID is empty", ErrInvalidConfig)
	}
	if c.Store == nil {
		return fmt.Errorf("%w: Store is nil", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, t := range c.Topics {
		if t == "" || seen[t] {
			return fmt.Errorf("%w: Topics has an empty or repeated topic %q", ErrInvalidConfig, t)
		}
		seen[t] = true
	}
	for _, lsn := range c.SkipLSNs {
		if lsn == 0 {
			return fmt.Errorf("%w: SkipLSNs contains 0", ErrInvalidConfig)
		}
	}
	if c.MaxGroupDeliveries < 0 || c.MaxGroupBytes < 0 || c.HelloTimeout < 0 || c.MaxQueueBytes < 0 || c.CloseTimeout < 0 {
		return fmt.Errorf("%w: negative bound", ErrInvalidConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.IncarnationID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("target: incarnation id: %w", err)
		}
		c.IncarnationID = hex.EncodeToString(b[:])
	}
	c.MaxGroupDeliveries = cmp.Or(c.MaxGroupDeliveries, DefaultMaxGroupDeliveries)
	c.MaxGroupBytes = cmp.Or(c.MaxGroupBytes, DefaultMaxGroupBytes)
	c.HelloTimeout = cmp.Or(c.HelloTimeout, DefaultHelloTimeout)
	c.MaxQueueBytes = cmp.Or(c.MaxQueueBytes, DefaultMaxQueueBytes)
	c.CloseTimeout = cmp.Or(c.CloseTimeout, DefaultCloseTimeout)
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}
