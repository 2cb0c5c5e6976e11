package targetqueue

import (
	"errors"
	"fmt"
)

const (
	// DefaultMaxCount bounds each inner queue's length: at the paper's
	// ~10 KB transactions that is ~40 MB per queue before the byte bound
	// bites first, and it is far more than a healthy target lags behind.
	DefaultMaxCount = 4096
	// DefaultMaxBytes bounds each inner queue's payload: two queues per
	// target at 16 MiB keeps 20 targets under 640 MiB in the worst case; a
	// target further behind is cheaper to recover from the LogStore.
	DefaultMaxBytes int64 = 16 << 20
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("invalid target queue config")

// Config bounds each of a target's two inner queues (normal and catchup)
// separately. Zero fields take the defaults above.
type Config struct {
	// MaxCount is the most messages one inner queue holds (default
	// DefaultMaxCount).
	MaxCount int
	// MaxBytes is the most payload bytes one inner queue holds (default
	// DefaultMaxBytes); one message alone may exceed it.
	MaxBytes int64
}

// Validate reports nonsense (negative bounds) without changing c; call it
// where configuration enters (flags, config file).
func (c Config) Validate() error { return c.validate() }

// validate fills defaults and rejects nonsense.
func (c *Config) validate() error {
	if c.MaxCount < 0 {
		return fmt.Errorf("%w: MaxCount %d < 0", ErrInvalidConfig, c.MaxCount)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("%w: MaxBytes %d < 0", ErrInvalidConfig, c.MaxBytes)
	}
	if c.MaxCount == 0 {
		c.MaxCount = DefaultMaxCount
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	return nil
}
