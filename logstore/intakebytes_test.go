package logstore

import (
	"errors"
	"testing"
)

// TestIntakeByteBoundConfig: the bound defaults to DefaultIntakeQueueBytes
// and must hold at least one request of MaxRequestBytes.
func TestIntakeByteBoundConfig(t *testing.T) {
	cfg := Config{ID: "t", Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}
	if err := cfg.validate(); err != nil || cfg.IntakeQueueBytes != DefaultIntakeQueueBytes {
		t.Fatalf("validate: %v, IntakeQueueBytes %d, want %d", err, cfg.IntakeQueueBytes, DefaultIntakeQueueBytes)
	}
	cfg.IntakeQueueBytes = int64(cfg.MaxRequestBytes) - 1
	if err := cfg.validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("IntakeQueueBytes below MaxRequestBytes: %v, want ErrConfig", err)
	}
}
