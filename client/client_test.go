package client

import (
	"errors"
	"testing"
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
