package logstore

import (
	"testing"

	"github.com/logplayer/logplayer/logstore/fsm"
)

func TestConfigStampsItsLimits(t *testing.T) {
	cfg := Config{ID: "n", Dir: t.TempDir(), RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2", MaxProducers: 7}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	got := fsm.LimitsOf(cfg.applyLimits())
	want := fsm.Limits{MaxProducers: 7, ProducerIdleNanos: int64(DefaultProducerIdleExpiry), MaxConsumers: MaxConsumers, MaxGroupOffsets: MaxGroupOffsets,
		GroupLeaseNanos: int64(DefaultGroupLease), MaxRegisteredTargets: MaxRegisteredTargets}
	if got != want {
		t.Fatalf("stamped limits %+v, want %+v", got, want)
	}
}
