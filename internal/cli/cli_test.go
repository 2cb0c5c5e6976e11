package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// testApp is a small program on the framework: a server role with a
// required flag, a repeatable and a per-invocation flag, and a group of
// two commands whose help comes from files.
func testApp() *App {
	a := &App{
		Name: "prog", EnvPrefix: "PROGTEST", Summary: "a test program.", Footer: "Quick start: prog serve --id x",
		Order: []string{"serve", "job run", "job list"},
		HelpFiles: fstest.MapFS{
			"job-run.txt":  {Data: []byte("summary: run a job\nsynopsis: --name NAME\n\nRuns a job.\n\nexamples:\nprog job run --name a\n")},
			"job-list.txt": {Data: []byte("summary: list the jobs\nsynopsis:\n\nLists the jobs.\n\nexamples:\nprog job list\n")},
		},
	}
	a.Register(&Command{Name: "job list", New: func() Runner { return &fakeCmd{} }})
	a.Register(&Command{Name: "job run", New: func() Runner { return &fakeCmd{} }})
	a.Register(&Command{
		Name:   "serve",
		Help:   Help{Summary: "serve", Synopsis: "--id ID", About: "\nServes.\n", Examples: []string{"prog serve --id a"}},
		Server: true, Required: []string{"id"},
		New: func() Runner { return &fakeCmd{} },
	})
	return a
}

// fakeCmd records its settings; run fails with fail when it is set.
type fakeCmd struct {
	id     string
	addrs  AddrList
	peers  PeerList
	topics onceList
	size   SizeValue
	fail   string
	ran    bool
}

func (c *fakeCmd) Flags(fs *flag.FlagSet) {
	c.addrs = NewAddrList("127.0.0.1:1")
	fs.StringVar(&c.id, "id", "", "the `id`")
	fs.Var(&c.addrs, "addr", "`addresses`")
	fs.Var(&c.peers, "peer", "a `peer`")
	fs.Var(&c.topics, "topic", "a `topic` (per invocation)")
	fs.Var(&c.size, "size", "a `size`")
	fs.StringVar(&c.fail, "fail", "", "fail with this `message`")
}

func (c *fakeCmd) Run(_ context.Context, s *Sys) error {
	c.ran = true
	switch c.fail {
	case "":
		return nil
	case "usage":
		return Usagef("bad\nusage")
	}
	return errors.New(c.fail)
}

// onceList is a per-invocation repeatable flag, as append's --topic.
type onceList struct{ items []string }

func (v *onceList) String() string     { return strings.Join(v.items, ",") }
func (v *onceList) Set(s string) error { v.items = append(v.items, s); return nil }
func (*onceList) Repeatable()          {}
func (*onceList) NoEnv()               {}

func runApp(t *testing.T, a *App, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = a.Run(context.Background(), args, &Sys{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestDispatchAndExitCodes(t *testing.T) {
	a := testApp()
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{nil, ExitUsage, "", "prog: missing command\nRun 'prog help' for the list of commands.\n"},
		{[]string{"nosuch"}, ExitUsage, "", "prog: unknown command \"nosuch\"\nRun 'prog help' for the list of commands.\n"},
		{[]string{"job"}, ExitUsage, "", "prog job: missing subcommand (one of: run, list)\nRun 'prog job --help' for usage.\n"},
		{[]string{"job", "--help"}, ExitOK, "Usage: prog job <subcommand> [flags]\n\nSubcommands:\n  job run             run a job\n  job list            list the jobs\n\nRun 'prog job <subcommand> --help' for details.\n", ""},
		{[]string{"job", "nosuch"}, ExitUsage, "", "prog: unknown command \"job nosuch\"\nRun 'prog help' for the list of commands.\n"},
		{[]string{"job", "run"}, ExitOK, "", ""},
		{[]string{"job", "run", "--fail", "it broke\n badly"}, ExitRuntime, "", "prog job run: it broke badly\n"},
		{[]string{"job", "run", "--fail", "usage"}, ExitUsage, "", "prog job run: bad usage\nRun 'prog job run --help' for usage.\n"},
		{[]string{"job", "run", "--bogus"}, ExitUsage, "", "prog job run: flag provided but not defined: --bogus\nRun 'prog job run --help' for usage.\n"},
		{[]string{"job", "run", "extra"}, ExitUsage, "", "prog job run: unexpected argument \"extra\" (every setting is a --flag)\nRun 'prog job run --help' for usage.\n"},
		{[]string{"job", "run", "--addr", "nohost"}, ExitUsage, "", "prog job run: invalid value \"nohost\" for flag --addr: \"nohost\": want host:port\nRun 'prog job run --help' for usage.\n"},
		{[]string{"serve"}, ExitUsage, "", "prog serve: missing required flag --id (or PROGTEST_ID, or \"id\" in --config)\nRun 'prog serve --help' for usage.\n"},
		{[]string{"job", "list", "--config", "x.json"}, ExitUsage, "", "prog job list: flag provided but not defined: --config\nRun 'prog job list --help' for usage.\n"},
	} {
		code, out, errs := runApp(t, a, tc.args...)
		if code != tc.code || out != tc.stdout || errs != tc.errs {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out, errs, tc.code, tc.stdout, tc.errs)
		}
	}
}

func TestHelpOutput(t *testing.T) {
	a := testApp()
	code, out, _ := runApp(t, a, "help")
	want := `prog: a test program.

Usage: prog <command> [flags]

Commands:
  serve     serve
  job run   run a job
  job list  list the jobs

Run 'prog <command> --help' for a command's flags and examples.
Quick start: prog serve --id x
`
	if code != ExitOK || out != want {
		t.Fatalf("help: exit %d\n%s\nwant\n%s", code, out, want)
	}
	code, out, _ = runApp(t, a, "help", "job", "list")
	want = `Usage: prog job list 

Lists the jobs.

Flags:
  --addr addresses
      addresses (default 127.0.0.1:1) [env PROGTEST_ADDR]
  --fail message
      fail with this message [env PROGTEST_FAIL]
  --id id
      the id [env PROGTEST_ID]
  --log-format format
      log format: text or json (logs go to stderr) (default text) [env PROGTEST_LOG_FORMAT]
  --log-level level
      log level: debug, info, warn or error (default info) [env PROGTEST_LOG_LEVEL]
  --peer peer
      a peer [env PROGTEST_PEER]
  --size size
      a size [env PROGTEST_SIZE]
  --topic topic
      a topic (per invocation)

Examples:
  prog job list
`
	if code != ExitOK || out != want {
		t.Fatalf("job list --help: exit %d\n%s\nwant\n%s", code, out, want)
	}
	_, out, _ = runApp(t, a, "serve", "-h")
	for _, w := range []string{"Usage: prog serve --id ID\n\nServes.\n\nFlags:\n", "  --config file\n", "  --id id\n      the id (required) [env PROGTEST_ID]\n"} {
		if !strings.Contains(out, w) {
			t.Fatalf("serve -h lacks %q:\n%s", w, out)
		}
	}
}

// Register refuses a command without a help file.
func TestRegisterWithoutHelpPanics(t *testing.T) {
	a := testApp()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "job stop") {
			t.Fatalf("recovered %v", r)
		}
	}()
	a.Register(&Command{Name: "job stop", New: func() Runner { return &fakeCmd{} }})
}

// Precedence flag > environment > file > default; a repeatable flag takes
// its values from one source, the environment's split on whitespace; a
// per-invocation flag is never read from the environment.
func TestSettingsLayers(t *testing.T) {
	a := testApp()
	file := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(file, []byte(`{"id": "file", "size": "2KiB", "peer": ["a=127.0.0.1:1/127.0.0.1:2"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROGTEST_CONFIG", file)
	t.Setenv("PROGTEST_PEER", "b=127.0.0.1:3/127.0.0.1:4  c=127.0.0.1:5/127.0.0.1:6")
	t.Setenv("PROGTEST_TOPIC", "ignored")
	t.Setenv("PROGTEST_ADDR", "127.0.0.1:7 127.0.0.1:8")
	r, err := a.Parse("serve", []string{"--size", "1MiB"}, &Sys{Stderr: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	c := r.(*fakeCmd)
	if c.id != "file" || c.size.Bytes != 1<<20 || len(c.peers.Peers) != 2 || c.peers.Peers[1].ID != "c" || len(c.topics.items) != 0 ||
		c.addrs.String() != "127.0.0.1:7,127.0.0.1:8" {
		t.Fatalf("id %q size %d peers %+v topics %v addrs %v", c.id, c.size.Bytes, c.peers.Peers, c.topics.items, c.addrs.String())
	}
}

// A per-invocation flag cannot come from a file (no server role has one
// today, so the parser is driven directly).
func TestConfigFileRefusesPerInvocationFlags(t *testing.T) {
	a := testApp()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var common commonFlags
	common.register(fs, true, false)
	var topics onceList
	fs.Var(&topics, "topic", "")
	file := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(file, []byte(`{"topic": ["orders=1"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	err := a.layerSettings(fs, true)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"topic" cannot be set in a file`) {
		t.Fatalf("got %v", err)
	}
}

func TestParseHelp(t *testing.T) {
	h, err := ParseHelp("summary: s\nsynopsis: --x X\n\n\nLine one.\n\nexamples: is not the marker\n\nexamples:\nprog a\n    --b\n")
	if err != nil || h.Summary != "s" || h.Synopsis != "--x X" || h.About != "Line one.\n\nexamples: is not the marker" ||
		strings.Join(h.Examples, "|") != "prog a|    --b" {
		t.Fatalf("%+v, %v", h, err)
	}
	for _, bad := range []string{"", "summary: s\nsynopsis:\n", "synopsis: x\nsummary: s\n\nabout\n", "summary: s\nsynopsis: x\nabout\n", "summary: s\nsynopsis: x\n\n\nexamples:\na\n"} {
		if _, err := ParseHelp(bad); err == nil {
			t.Errorf("ParseHelp(%q) took it", bad)
		}
	}
}

func TestSizeValue(t *testing.T) {
	for in, want := range map[string]string{"4096": "4KiB", "64MiB": "64MiB", "1GiB": "1GiB", "100": "100", "3B": "3"} {
		var v SizeValue
		if err := v.Set(in); err != nil || v.String() != want {
			t.Errorf("Set(%q): %q, %v; want %q", in, v.String(), err, want)
		}
	}
	var v SizeValue
	if err := v.Set("lots"); err == nil {
		t.Error("Set(lots) took it")
	}
}
