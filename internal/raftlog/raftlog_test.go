package raftlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLevelsAndArgs(t *testing.T) {
	var buf bytes.Buffer
	sl := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := New(sl, hclog.NoLevel)
	l.Debug("chatty", "k", 1)
	if buf.Len() != 0 {
		t.Fatalf("debug record passed an info-level adapter: %q", buf.String())
	}
	l.Named("raft").With("node", "n1").Info("elected", "term", 3)
	out := buf.String()
	for _, want := range []string{"msg=elected", "component=raft", "node=n1", "term=3", "level=INFO"} {
		if !strings.Contains(out, want) {
			t.Errorf("record %q lacks %q", out, want)
		}
	}
	buf.Reset()
	l.StandardLogger(nil).Print("[WARN] disk slow")
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, `msg="disk slow"`) {
		t.Errorf("standard logger record = %q", out)
	}
	if l.IsDebug() || !l.IsInfo() {
		t.Errorf("IsDebug=%v IsInfo=%v at info level", l.IsDebug(), l.IsInfo())
	}
}
