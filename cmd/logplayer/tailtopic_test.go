package main

import (
	"strings"
	"testing"

	"github.com/logplayer/logplayer/internal/cli"
)

// TestTailUnknownTopic: tail of a topic that was never written fails
// (exit 1) with UNKNOWN_TOPIC naming it, with and without --follow,
// instead of printing nothing and exiting 0 (or waiting forever);
// --wait-for-topic needs --follow.
func TestTailUnknownTopic(t *testing.T) {
	d := startTestDev(t)
	addr := "--addr=" + strings.Join(d.StoreAddrs, ",")
	for _, args := range [][]string{
		{"tail", addr, "--topic", "no-such-topic"},
		{"tail", addr, "--topic", "no-such-topic", "--follow"},
	} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != cli.ExitRuntime || out != "" || !strings.Contains(errOut, "UNKNOWN_TOPIC") || !strings.Contains(errOut, `"no-such-topic"`) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit 1 naming UNKNOWN_TOPIC and the topic", args, code, out, errOut)
		}
	}
	code, _, errOut := runCLI(t, nil, "tail", addr, "--topic", "no-such-topic", "--wait-for-topic")
	wantUsage(t, code, errOut, "--wait-for-topic needs --topic and --follow")
}
