package logplayer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseTargets(t *testing.T) {
	good := `{"targets": [
		{"id": "shard-0", "address": "127.0.0.1:7600", "topics": ["shard-0"]},
		{"id": "search", "address": "localhost:7601", "topics": ["orders", "users"]}
	]}`
	ts, err := ParseTargets([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[1].ID != "search" || ts[1].Address != "localhost:7601" || len(ts[1].Topics) != 2 {
		t.Fatalf("parsed %+v", ts)
	}
	path := filepath.Join(t.TempDir(), "targets.json")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if ts, err := LoadTargets(path); err != nil || len(ts) != 2 {
		t.Fatalf("LoadTargets: %v %v", ts, err)
	}
	if _, err := LoadTargets(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("missing file: %v", err)
	}

	bad := []struct{ name, json, want string }{
		{"not json", `{"targets": [`, "targets file"},
		{"unknown key", `{"targets": [], "extra": 1}`, "unknown field"},
		{"unknown target key", `{"targets": [{"id": "a", "address": "h:1", "topics": ["t"], "topic": "x"}]}`, "unknown field"},
		{"trailing data", `{"targets": []} {}`, "after the JSON object"},
		{"duplicate id", `{"targets": [{"id": "a", "address": "h:1", "topics": ["t"]}, {"id": "a", "address": "h:2", "topics": ["t"]}]}`, "used twice"},
		{"empty id", `{"targets": [{"id": "", "address": "h:1", "topics": ["t"]}]}`, "target id"},
		{"bad id", `{"targets": [{"id": "a/b", "address": "h:1", "topics": ["t"]}]}`, "target id"},
		{"no port", `{"targets": [{"id": "a", "address": "h", "topics": ["t"]}]}`, "address"},
		{"bad port", `{"targets": [{"id": "a", "address": "h:99999", "topics": ["t"]}]}`, "bad port"},
		{"empty host", `{"targets": [{"id": "a", "address": ":1", "topics": ["t"]}]}`, "empty host"},
		{"no topics", `{"targets": [{"id": "a", "address": "h:1", "topics": []}]}`, "no topics"},
		{"bad topic", `{"targets": [{"id": "a", "address": "h:1", "topics": ["with space"]}]}`, "invalid topic"},
		{"long topic", `{"targets": [{"id": "a", "address": "h:1", "topics": ["` + strings.Repeat("x", 250) + `"]}]}`, "invalid topic"},
		{"repeated topic", `{"targets": [{"id": "a", "address": "h:1", "topics": ["t", "t"]}]}`, "listed twice"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTargets([]byte(tc.json))
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{LogStore: []string{"127.0.0.1:1"}}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.MaxBatchCount != DefaultMaxBatchCount || c.WindowBytes != DefaultWindowBytes || c.HelloTimeout != DefaultHelloTimeout ||
		c.Keepalive.Time != DefaultKeepaliveTime || c.PlayerID == "" || c.Now == nil || c.Registerer == nil {
		t.Fatalf("defaults not filled: %+v", c)
	}
	bad := []Config{
		{},
		{LogStore: []string{"nohost"}},
		{LogStore: []string{"h:1"}, MaxBatchCount: -1},
		{LogStore: []string{"h:1"}, WindowBytes: -1},
		{LogStore: []string{"h:1"}, HelloTimeout: -time.Second},
		{LogStore: []string{"h:1"}, RetryInitial: time.Second, RetryMax: time.Millisecond},
		{LogStore: []string{"h:1"}, Targets: []TargetConfig{{ID: "a", Address: "h:1"}}},
	}
	for i, c := range bad {
		if err := c.validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: %v, want ErrInvalidConfig", i, err)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New: %v", err)
	}
}
