package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/cli"
)

// setEnv sets env in the process environment for the rest of the test
// (TestMain clears every LOGPLAYER_ variable before the tests run, so env is
// the whole of the CLI's environment).
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// runCLI runs the CLI in-process with env set (see setEnv).
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	setEnv(t, env)
	var out, errb bytes.Buffer
	s := &cli.Sys{
		Stdin:  strings.NewReader(""),
		Stdout: &out,
		Stderr: &errb,
	}
	code = app.Run(context.Background(), args, s)
	return code, out.String(), errb.String()
}

// wantUsage asserts exit code 2 with one error line naming want and a hint.
func wantUsage(t *testing.T, code int, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if code != cli.ExitUsage || len(lines) != 2 || !strings.Contains(lines[0], want) || !strings.HasPrefix(lines[1], "Run 'logplayer") {
		t.Fatalf("exit %d, stderr %q: want exit 2, one line containing %q and a hint", code, stderr, want)
	}
}

func TestHelpOfEveryCommand(t *testing.T) {
	for _, c := range app.Commands() {
		code, out, errOut := runCLI(t, nil, append(strings.Fields(c.Name), "--help")...)
		if code != cli.ExitOK || errOut != "" {
			t.Fatalf("%s --help: exit %d, stderr %q", c.Name, code, errOut)
		}
		for _, want := range []string{"Usage: logplayer " + c.Name, "Flags:", "--log-level", "Examples:\n  "} {
			if !strings.Contains(out, want) {
				t.Fatalf("%s --help lacks %q:\n%s", c.Name, want, out)
			}
		}
	}
	code, out, _ := runCLI(t, nil, "help")
	if code != cli.ExitOK {
		t.Fatalf("help: exit %d", code)
	}
	if len(app.Commands()) != len(commands) {
		t.Fatalf("%d commands registered, the table has %d", len(app.Commands()), len(commands))
	}
	for i, c := range app.Commands() {
		if c.Name != commands[i].Name {
			t.Fatalf("command %d is %q, the table says %q", i, c.Name, commands[i].Name)
		}
	}
	for _, c := range app.Commands() {
		if !strings.Contains(out, c.Name) {
			t.Fatalf("help does not list %q:\n%s", c.Name, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: nil, want: "missing command"},
		{args: []string{"nosuch"}, want: `unknown command "nosuch"`},
		{args: []string{"cluster"}, want: "missing subcommand"},
		{args: []string{"cluster", "nosuch"}, want: `unknown command "cluster nosuch"`},
		{args: []string{"cluster", "add", "--id", "n4", "--raft-addr", "127.0.0.1:1"}, want: "missing required flag --api-addr"},
		{args: []string{"append", "--topic", "orders"}, want: "want TOPIC=VALUE"},
		{args: []string{"append"}, want: "nothing to append"},
		{args: []string{"append", "--topic", `orders={"id":`}, want: "malformed JSON"},
		{args: []string{"append", "--topic", "o=1", "--sequence", "3"}, want: "--producer-id and --sequence go together"},
		{args: []string{"append", "--topic", "o=1", "--producer", "p", "--producer-id", "q", "--sequence", "1"}, want: "--producer and --producer-id exclude each other"},
		{args: []string{"tail", "--offset", "3"}, want: "--offset needs --topic"},
		{args: []string{"tail", "--from", "0"}, want: "--from must be at least 1"},
		{args: []string{"status", "--addr", "localhost"}, want: "want host:port"},
		{args: []string{"demo", "--shard", "shard-1=127.0.0.1:1"}, want: "at least 2 shards"},
		{args: []string{"bench", "store", "--clients", "1,0"}, want: "want positive integers"},
		{args: []string{"bench"}, want: "missing subcommand"},
		{args: []string{"version", "--bogus"}, want: "flag provided but not defined: --bogus"},
		{args: []string{"version", "extra"}, want: `unexpected argument "extra"`},
		{args: []string{"version", "--log-level", "loud"}, want: `invalid value "loud" for flag --log-level`},
		{args: []string{"version"}, env: map[string]string{"LOGPLAYER_LOG_FORMAT": "xml"}, want: "LOGPLAYER_LOG_FORMAT"},
		{args: []string{"store", "--data-dir", "d", "--raft-addr", "127.0.0.1:1", "--api-addr", "127.0.0.1:2"}, want: "missing required flag --id"},
		{args: []string{"store", "--id", "n1", "--data-dir", "d", "--raft-addr", "nohostport", "--api-addr", "127.0.0.1:2"}, want: "want host:port"},
		{args: []string{"store", "--peer", "n1"}, want: "want ID=RAFT_ADDR/API_ADDR"},
		{args: []string{"store", "--max-batch-bytes", "lots"}, want: "want a byte size"},
		{args: []string{"store"}, env: map[string]string{"LOGPLAYER_PEER": "n1=127.0.0.1:1/127.0.0.1:2 bad"}, want: `environment variable "LOGPLAYER_PEER"`},
		// Client commands read no config file, from a flag or the environment.
		{args: []string{"status", "--config", "c.json"}, want: "flag provided but not defined: --config"},
		{args: []string{"append"}, env: map[string]string{"LOGPLAYER_CONFIG": "c.json", "LOGPLAYER_TOPIC": "orders=1"}, want: "nothing to append"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.env, tc.args...)
			wantUsage(t, code, errOut, tc.want)
		})
	}
}

// parseStore parses a store command line without running it.
func parseStore(t *testing.T, env map[string]string, args ...string) (*storeCmd, error) {
	t.Helper()
	setEnv(t, env)
	s := &cli.Sys{Stderr: &bytes.Buffer{}}
	r, err := app.Parse("store", args, s)
	return r.(*storeCmd), err
}

func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSettingsPrecedence(t *testing.T) {
	file := writeFile(t, "n1.json", `{
		"id": "from-file", "data-dir": "/file", "raft-addr": "127.0.0.1:7410",
		"api-addr": "127.0.0.1:7400", "max-batch-txns": 7, "election-timeout": "3s",
		"peer": ["n1=127.0.0.1:7410/127.0.0.1:7400", "n2=127.0.0.1:7411/127.0.0.1:7401"]
	}`)
	env := map[string]string{
		"LOGPLAYER_CONFIG":   file,
		"LOGPLAYER_DATA_DIR": "/env",
		"LOGPLAYER_API_ADDR": "127.0.0.1:9000",
		"LOGPLAYER_PEER":     "n9=127.0.0.1:1/127.0.0.1:2",
	}
	c, err := parseStore(t, env, "--api-addr", "127.0.0.1:8000")
	if err != nil {
		t.Fatal(err)
	}
	if c.id != "from-file" || c.dataDir != "/env" || c.apiAddr.Addr != "127.0.0.1:8000" || c.maxBatchTxns != 7 ||
		c.electionTimeout != 3*time.Second || c.heartbeatTimeout == 0 {
		t.Fatalf("got id %q data-dir %q api-addr %q max-batch-txns %d election %v heartbeat %v",
			c.id, c.dataDir, c.apiAddr.Addr, c.maxBatchTxns, c.electionTimeout, c.heartbeatTimeout)
	}
	// A repeatable flag takes all its values from one source: env beats file.
	if len(c.peers.Peers) != 1 || c.peers.Peers[0].ID != "n9" {
		t.Fatalf("peers %+v, want only n9 from the environment", c.peers.Peers)
	}
	// The command line beats the environment for a repeatable flag too.
	c, err = parseStore(t, env, "--peer", "a=127.0.0.1:1/127.0.0.1:2", "--peer", "b=127.0.0.1:3/127.0.0.1:4")
	if err != nil || len(c.peers.Peers) != 2 || c.peers.Peers[1].ID != "b" {
		t.Fatalf("peers %+v, err %v", c.peers.Peers, err)
	}
	// A flag given its default value is still given: it beats env and file.
	setEnv(t, map[string]string{"LOGPLAYER_MAX_BATCH_TXNS": "5", "LOGPLAYER_PEER": "a=127.0.0.1:1/127.0.0.1:2   b=127.0.0.1:3/127.0.0.1:4 "})
	c, err = parseStore(t, nil, "--max-batch-txns", "1024", "--election-timeout", "1s")
	if err != nil || c.maxBatchTxns != 1024 || c.electionTimeout != time.Second {
		t.Fatalf("max-batch-txns %d election %v, err %v: want the command line's values", c.maxBatchTxns, c.electionTimeout, err)
	}
	// The environment splits a repeatable flag on any whitespace.
	if len(c.peers.Peers) != 2 || c.peers.Peers[1].ID != "b" {
		t.Fatalf("peers %+v from LOGPLAYER_PEER, want a and b", c.peers.Peers)
	}
}

// The client commands read their flags from the environment too, a
// repeatable one split on whitespace; per-invocation flags (append's
// --topic) never come from it.
func TestClientSettingsFromEnv(t *testing.T) {
	setEnv(t, map[string]string{"LOGPLAYER_ADDR": "127.0.0.1:1 127.0.0.1:2,127.0.0.1:3", "LOGPLAYER_TIMEOUT": "3s", "LOGPLAYER_TOPIC": "orders=1"})
	s := &cli.Sys{Stderr: &bytes.Buffer{}}
	r, err := app.Parse("append", []string{"--put", "shard-0:k=v"}, s)
	if err != nil {
		t.Fatal(err)
	}
	c := r.(*appendCmd)
	if got := c.conn.Addrs.String(); got != "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3" || c.conn.Timeout != 3*time.Second {
		t.Fatalf("addr %q timeout %v from the environment", got, c.conn.Timeout)
	}
	if len(c.messages.items) != 0 || len(c.puts.items) != 1 {
		t.Fatalf("%d messages (LOGPLAYER_TOPIC must be ignored), %d puts", len(c.messages.items), len(c.puts.items))
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`{"id": "n1", "typo-flag": 1}`, `unknown setting "typo-flag"`},
		{`{"id": "n1",`, "malformed JSON"},
		{`["id"]`, "not a JSON object"},
		{`{"id": ["a", "b"]}`, `"id" takes one value`},
		{`{"id": {"nested": 1}}`, "want a string, number, boolean"},
		{`{"id": "a", "id": "b"}`, `"id" is set twice`},
		{`{"election-timeout": "soon"}`, `invalid value "soon" for "election-timeout"`},
		{`{"id": "a"} {}`, "unexpected data after"},
		{`{"config": "other.json"}`, `unknown setting "config"`},
		{`{"LOGPLAYER_ID": "n1"}`, `unknown setting "LOGPLAYER_ID"`},
		{`{"peer": ["n1=127.0.0.1:1/127.0.0.1:2", "bad"]}`, `invalid value "bad" for "peer"`},
		{`{"id": null, "data-dir": [{"a": 1}]}`, `"data-dir": want a string, number, boolean`},
	} {
		path := writeFile(t, "c.json", tc.data)
		code, _, errOut := runCLI(t, nil, "store", "--config", path)
		wantUsage(t, code, errOut, tc.want)
	}
	code, _, errOut := runCLI(t, nil, "store", "--config", filepath.Join(t.TempDir(), "missing.json"))
	wantUsage(t, code, errOut, "no such file")
}
