package client

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("no addresses accepted")
	}
	if _, err := New(Config{Addrs: []string{""}}); err == nil {
		t.Fatal("empty address accepted")
	}
	c, err := New(Config{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.MaxBackoff != DefaultMaxBackoff || c.cfg.CallTimeout != DefaultCallTimeout {
		t.Fatalf("defaults not filled: %+v", c.cfg)
	}
	c.Close()
	if _, err := c.conn("127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("conn after Close: %v", err)
	}
}

// TestRetryable pins which errors may be retried: only those that surely
// did not write are "safe"; unknown outcomes are transient but unsafe.
func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		name            string
		err             error
		safe, transient bool
	}{
		{"not leader", apierr.Newf(logstorepb.ErrorCode_NOT_LEADER, "x"), true, true},
		{"queue full", apierr.Newf(logstorepb.ErrorCode_QUEUE_FULL, "x"), true, true},
		{"table full", apierr.Newf(logstorepb.ErrorCode_TABLE_FULL, "x"), false, false},
		{"shutting down", apierr.Newf(logstorepb.ErrorCode_SHUTTING_DOWN, "x"), true, true},
		{"outcome unknown", apierr.Newf(logstorepb.ErrorCode_TIMEOUT, "x"), false, true},
		{"transport", status.Error(codes.Unavailable, "conn reset"), false, true},
		{"deadline", status.Error(codes.DeadlineExceeded, "slow"), false, true},
		{"condition", apierr.Newf(logstorepb.ErrorCode_CONDITION_FAILED, "x"), false, false},
		{"invalid", apierr.Newf(logstorepb.ErrorCode_INVALID_TOPIC, "x"), false, false},
		{"below retention", apierr.Newf(logstorepb.ErrorCode_BELOW_RETENTION, "x"), false, false},
	} {
		safe, transient := retryable(tc.err)
		if safe != tc.safe || transient != tc.transient {
			t.Errorf("%s: safe=%v transient=%v, want %v %v", tc.name, safe, transient, tc.safe, tc.transient)
		}
	}
}
