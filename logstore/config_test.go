package logstore

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		return Config{ID: "n0", Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}
	}
	c := good()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.IntakeQueue != DefaultIntakeQueue || c.MaxRequestBytes != DefaultMaxRequestBytes || c.HeartbeatTimeout != DefaultHeartbeatTimeout ||
		c.HoldReturnRatio != DefaultHoldReturnRatio ||
		c.Logger == nil || c.Registry == nil || c.Now == nil {
		t.Fatalf("defaults not filled: %+v", c)
	}
	for name, mutate := range map[string]func(*Config){
		"no id":                  func(c *Config) { c.ID = "" },
		"no dir":                 func(c *Config) { c.Dir = "" },
		"no raft addr":           func(c *Config) { c.RaftAddr = "" },
		"no api addr":            func(c *Config) { c.APIAddr = "" },
		"negative queue":         func(c *Config) { c.IntakeQueue = -1 },
		"negative hold ratio":    func(c *Config) { c.HoldReturnRatio = -1 },
		"NaN hold ratio":         func(c *Config) { c.HoldReturnRatio = math.NaN() },
		"message over request":   func(c *Config) { c.MaxMessageBytes, c.MaxRequestBytes = 10, 5 },
		"cap below retention":    func(c *Config) { c.RetentionBytes, c.RetentionCapBytes = 10, 5 },
		"cap age below age":      func(c *Config) { c.RetentionAge, c.RetentionCapAge = time.Hour, time.Minute },
		"lease over heartbeat":   func(c *Config) { c.HeartbeatTimeout, c.LeaderLeaseTimeout = time.Second, 2*time.Second },
		"bootstrap without me":   func(c *Config) { c.Bootstrap = []Peer{{ID: "x", RaftAddr: "a"}} },
		"bootstrap duplicate":    func(c *Config) { c.Bootstrap = []Peer{{ID: "n0", RaftAddr: "a"}, {ID: "n0", RaftAddr: "b"}} },
		"bootstrap no raft addr": func(c *Config) { c.Bootstrap = []Peer{{ID: "n0"}} },
	} {
		c := good()
		mutate(&c)
		if err := c.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
}
