package main

import (
	"strings"
	"testing"

	"github.com/logplayer/logplayer/internal/cli"
)

// TestTopicCommandsAgainstDev: the dev cluster declares shard-* kv, so
// `append` of the bytes "hi" to shard-0 is refused (SCHEMA_MISMATCH) and
// writes nothing; topic create/describe/list declare and show schemas;
// status reports the topic count.
func TestTopicCommandsAgainstDev(t *testing.T) {
	d := startTestDev(t)
	addr := "--addr=" + strings.Join(d.StoreAddrs, ",")

	code, _, errOut := runCLI(t, nil, "append", addr, "--raw", "--topic", "shard-0=hi")
	wantRuntimeError(t, code, errOut, "SCHEMA_MISMATCH")
	if !strings.Contains(errOut, `"shard-0" message 0`) {
		t.Fatalf("refusal %q does not name the topic and message index", errOut)
	}
	code, out, errOut := runCLI(t, nil, "topic", "describe", addr, "--topic", "shard-0", "--json")
	if code != cli.ExitOK {
		t.Fatalf("describe: exit %d, %q", code, errOut)
	}
	if got := jsonLines(t, out)[0]; got["schema"] != "kv" || got["declared_by"] != "shard-*" || got["next_offset"] != 0.0 {
		t.Fatalf("describe shard-0: %v (the refused append must not be written)", got)
	}

	code, out, errOut = runCLI(t, nil, "topic", "create", addr, "--topic", "orders", "--schema", "kv")
	if code != cli.ExitOK || !strings.Contains(out, "declared topic orders with schema kv") {
		t.Fatalf("create: exit %d, %q, %q", code, out, errOut)
	}
	code, _, errOut = runCLI(t, nil, "append", addr, "--topic", `orders={"id":1}`)
	wantRuntimeError(t, code, errOut, "SCHEMA_MISMATCH")
	if code, out, _ = runCLI(t, nil, "topic", "create", addr, "--topic", "orders", "--schema", "bytes"); code != cli.ExitOK || !strings.Contains(out, "(was kv)") {
		t.Fatalf("re-declare: exit %d, %q", code, out)
	}
	if code, _, errOut = runCLI(t, nil, "append", addr, "--topic", `orders={"id":1}`); code != cli.ExitOK {
		t.Fatalf("append to orders as bytes: exit %d, %q", code, errOut)
	}

	code, out, errOut = runCLI(t, nil, "topic", "list", addr, "--json")
	if code != cli.ExitOK {
		t.Fatalf("list: exit %d, %q", code, errOut)
	}
	list := jsonLines(t, out)[0]
	topics, patterns := list["topics"].([]any), list["patterns"].([]any)
	if len(topics) != 1 || topics[0].(map[string]any)["topic"] != "orders" || topics[0].(map[string]any)["next_offset"] != 1.0 ||
		len(patterns) != 1 || patterns[0].(map[string]any)["pattern"] != "shard-*" || patterns[0].(map[string]any)["schema"] != "kv" {
		t.Fatalf("list: %v", list)
	}
	if code, out, _ = runCLI(t, nil, "topic", "list", addr); code != cli.ExitOK || !strings.Contains(out, "PATTERN") || !strings.Contains(out, "orders") {
		t.Fatalf("list table: exit %d, %q", code, out)
	}

	code, out, errOut = runCLI(t, nil, "status", addr, "--json")
	if code != cli.ExitOK {
		t.Fatalf("status: exit %d, %q", code, errOut)
	}
	if st := jsonLines(t, out)[0]; st["topic_count"] != 1.0 || len(st["topics"].([]any)) != 1 {
		t.Fatalf("status topics: %v / %v", st["topic_count"], st["topics"])
	}

	// Bad input: usage errors, and a refused declaration.
	if code, _, _ = runCLI(t, nil, "topic", "create", addr, "--topic", "a", "--pattern", "b*"); code != cli.ExitUsage {
		t.Fatalf("both --topic and --pattern: exit %d", code)
	}
	if code, _, _ = runCLI(t, nil, "topic", "create", addr, "--topic", "a", "--schema", "json"); code != cli.ExitUsage {
		t.Fatalf("unknown schema: exit %d", code)
	}
	code, _, errOut = runCLI(t, nil, "topic", "create", addr, "--pattern", "no*way*")
	wantRuntimeError(t, code, errOut, "INVALID_TOPIC")
	code, _, errOut = runCLI(t, nil, "topic", "describe", addr, "--topic", "never-written")
	wantRuntimeError(t, code, errOut, "UNKNOWN_TOPIC")

	// --limit stops the listing, and still shows the patterns.
	if code, _, errOut = runCLI(t, nil, "topic", "create", addr, "--topic", "zeta"); code != cli.ExitOK {
		t.Fatalf("create zeta: exit %d, %q", code, errOut)
	}
	code, out, errOut = runCLI(t, nil, "topic", "list", addr, "--limit", "1", "--json")
	if code != cli.ExitOK {
		t.Fatalf("list --limit: exit %d, %q", code, errOut)
	}
	if l := jsonLines(t, out)[0]; len(l["topics"].([]any)) != 1 || l["truncated"] != true || len(l["patterns"].([]any)) != 1 {
		t.Fatalf("list --limit 1: %v", l)
	}
}
