package fsm

import (
	"fmt"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// nanosPerHour is one hour of log time in nanoseconds. Log time is the
// entry's TimestampUnixNano; this package does not import time, so no
// clock can creep into apply.
const nanosPerHour = 3600 * 1_000_000_000

// producerSweepEveryNanos is how often, in log time, apply drops idle
// producers: a sweep scans the whole table, so it runs at most once a
// minute of log time instead of on every entry.
const producerSweepEveryNanos = nanosPerHour / 60

// The legacy limits: what every node applied before the leader stamped
// ApplyLimits into entries (the defaults of the time; cluster-wide caps did
// not exist). An entry without limits, or a zero field, applies with these,
// so a replayed old entry does what it did when first applied. Never change
// them.
const (
	legacyMaxProducers      = 10000
	legacyProducerIdleNanos = 24 * nanosPerHour
	legacyMaxConsumers      = 0       // unbounded
	legacyMaxGroupOffsets   = 0       // unbounded
	legacyMaxTopics         = 0       // unbounded (and below TopicsVersion never applied)
	legacyMaxTopicDecls     = 0       // unbounded
	maxLimit                = 1 << 31 // clamps a stamped count so it fits an int on every platform
)

// Limits are the bounds one entry is applied with (its ApplyLimits
// decoded by LimitsOf); a zero cap is no cap.
type Limits struct {
	MaxProducers      int
	ProducerIdleNanos int64 // log time after which an idle producer is dropped
	MaxConsumers      int
	MaxGroupOffsets   int
	// GroupLeaseNanos is a PlayerGroup member's lease in log time.
	GroupLeaseNanos      int64
	MaxRegisteredTargets int
	// MaxTopics caps the topic table (applied from TopicsVersion on);
	// MaxTopicDeclarations the declarations.
	MaxTopics            int
	MaxTopicDeclarations int
	// AllowLegacyProducers takes legacy (unregistered) producer ids; from
	// AdmissionVersion on they are refused without it. An entry without
	// limits (written before the field existed) allows them.
	AllowLegacyProducers bool
}

// LimitsOf decodes an entry's stamped limits (nil: all legacy; a zero
// field: that field's legacy value).
func LimitsOf(l *logstorepb.ApplyLimits) Limits {
	count := func(v uint64, legacy int) int {
		if v == 0 {
			return legacy
		}
		return int(min(v, maxLimit))
	}
	out := Limits{
		MaxProducers:         count(l.GetMaxProducers(), legacyMaxProducers),
		ProducerIdleNanos:    legacyProducerIdleNanos,
		MaxConsumers:         count(l.GetMaxConsumers(), legacyMaxConsumers),
		MaxGroupOffsets:      count(l.GetMaxGroupOffsets(), legacyMaxGroupOffsets),
		MaxTopics:            count(l.GetMaxTopics(), legacyMaxTopics),
		MaxTopicDeclarations: count(l.GetMaxTopicDeclarations(), legacyMaxTopicDecls),
	}
	// An entry without limits (a leader before ApplyLimits) takes them,
	// as that leader did. From AdmissionVersion on every leader stamps
	// the field.
	out.AllowLegacyProducers = l == nil || l.GetAllowLegacyProducers()
	if d := l.GetProducerIdleExpiryNanos(); d > 0 {
		out.ProducerIdleNanos = d
	}
	out.GroupLeaseNanos = DefaultGroupLeaseNanos
	if d := l.GetGroupLeaseNanos(); d > 0 {
		out.GroupLeaseNanos = d
	}
	out.MaxRegisteredTargets = count(l.GetMaxRegisteredTargets(), legacyMaxRegisteredTargets)
	return out
}

// full reports whether a table of n rows with cap limit (0: none) has no
// room for added more rows.
func full(n, added, limit int) bool { return limit > 0 && n+added > limit }

// tableFull is apply's refusal of rows beyond a table's cap:
// RESOURCE_EXHAUSTED / TABLE_FULL with limit = the cap. Nothing was
// changed; the request may succeed once rows are removed (clients do not
// retry it, unlike QUEUE_FULL).
func tableFull(table string, n, limit int) error {
	return apierr.New(logstorepb.ErrorCode_TABLE_FULL,
		fmt.Sprintf("%s table is full: %d rows, cap %d", table, n, limit),
		func(d *logstorepb.ErrorDetail) { d.Limit = uint64(limit) })
}
