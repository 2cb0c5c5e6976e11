package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
)

// Exit codes of every subcommand.
const (
	exitOK      = 0
	exitRuntime = 1 // the command ran and failed
	exitUsage   = 2 // the command line (or env, or config file) is wrong
)

// sys is what a command may touch of the outside world; tests pass their own.
// The environment is the process's (ff reads it; tests use t.Setenv).
type sys struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// log is set up from --log-level and --log-format before run is called.
	log *slog.Logger
}

// runner is one parsed subcommand: flags binds its settings, run does the work.
type runner interface {
	flags(fs *flag.FlagSet)
	run(ctx context.Context, s *sys) error
}

// command describes a subcommand for dispatch and help.
type command struct {
	name     string // "append", or two words for a group: "cluster add"
	summary  string // one line in the command list
	synopsis string // arguments after the name in the usage line
	about    string // what it does, a few lines
	examples []string
	// server roles also read --config; all commands read the environment.
	server bool
	// quietLogs makes warn the default log level (dev: its own output is
	// the point, the components' info logs would drown it).
	quietLogs bool
	required  []string // flags that must be set by some source
	new       func() runner
}

// usageError is a wrong command line: exit 2 with a hint.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// commands is the command table, in helpOrder.
var commands []*command

// helpOrder is the order help lists the commands in: the servers, the
// operator commands, the rest.
var helpOrder = []string{
	"dev", "store", "player", "shard", "events", "sink postgres", "sink sqlite",
	"append", "tail", "status", "cluster add", "cluster remove", "cluster transfer",
	"group delete", "topic create", "topic describe", "topic list",
	"target add", "target remove", "target list", "target describe", "target reset", "players",
	"target clone", // issue #29 (cmd/logplayer/targetclone.go)
	"backup save", "backup restore", "certs", "demo", "bench store", "bench player", "bench sink", "version",
}

// register adds c to the table (from each command file's init).
func register(c *command) {
	commands = append(commands, c)
	rank := func(name string) int {
		if i := slices.Index(helpOrder, name); i >= 0 {
			return i
		}
		return len(helpOrder)
	}
	slices.SortStableFunc(commands, func(a, b *command) int { return rank(a.name) - rank(b.name) })
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// groups are the first words of two-word commands ("cluster", "bench").
func isGroup(word string) bool {
	for _, c := range commands {
		if strings.HasPrefix(c.name, word+" ") {
			return true
		}
	}
	return false
}

// run dispatches args to a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, s *sys) int {
	if len(args) == 0 {
		fmt.Fprintln(s.stderr, "logplayer: missing command")
		fmt.Fprintln(s.stderr, "Run 'logplayer help' for the list of commands.")
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return run(ctx, append(args[1:], "--help"), s)
		}
		writeCommandList(s.stdout)
		return exitOK
	case "-v", "-version", "--version":
		name = "version"
	}
	rest := args[1:]
	if isGroup(name) {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			if len(rest) > 0 && isHelpFlag(rest[0]) {
				writeGroupList(s.stdout, name)
				return exitOK
			}
			fmt.Fprintf(s.stderr, "logplayer %s: missing subcommand (one of: %s)\n", name, strings.Join(groupMembers(name), ", "))
			fmt.Fprintf(s.stderr, "Run 'logplayer %s --help' for usage.\n", name)
			return exitUsage
		}
		name, rest = name+" "+rest[0], rest[1:]
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(s.stderr, "logplayer: unknown command %q\n", name)
		fmt.Fprintln(s.stderr, "Run 'logplayer help' for the list of commands.")
		return exitUsage
	}
	r, err := c.parse(rest, s)
	if errors.Is(err, flag.ErrHelp) {
		c.writeHelp(s.stdout, r)
		return exitOK
	}
	if err == nil {
		err = r.run(ctx, s)
	}
	return report(s.stderr, c, err)
}

// report prints err as one line (plus a hint for usage errors) and returns
// the exit code.
func report(w io.Writer, c *command, err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "logplayer %s: %s\n", c.name, oneLine(ue.msg))
		fmt.Fprintf(w, "Run 'logplayer %s --help' for usage.\n", c.name)
		return exitUsage
	}
	fmt.Fprintf(w, "logplayer %s: %s\n", c.name, oneLine(err.Error()))
	return exitRuntime
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func isHelpFlag(a string) bool {
	return a == "-h" || a == "-help" || a == "--help"
}

func groupMembers(group string) []string {
	var out []string
	for _, c := range commands {
		if after, ok := strings.CutPrefix(c.name, group+" "); ok {
			out = append(out, after)
		}
	}
	return out
}

func writeCommandList(w io.Writer) {
	fmt.Fprint(w, `logplayer: atomic multi-topic writes and exactly-once delivery.

Usage: logplayer <command> [flags]

Commands:
`)
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'logplayer <command> --help' for a command's flags and examples.
Quick start: logplayer dev --demo 30s
`)
}

func writeGroupList(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage: logplayer %s <subcommand> [flags]\n\nSubcommands:\n", group)
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			fmt.Fprintf(w, "  %-18s  %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintf(w, "\nRun 'logplayer %s <subcommand> --help' for details.\n", group)
}

// parse binds a fresh runner's flags, parses args, then has ff fill what
// args left unset from the environment and (server roles) the config file,
// and checks the required flags. It returns flag.ErrHelp for -h/--help.
func (c *command) parse(args []string, s *sys) (runner, error) {
	r := c.new()
	fs := flag.NewFlagSet("logplayer "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var common commonFlags
	common.register(fs, c.server, c.quietLogs)
	r.flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return r, err
		}
		return r, &usageError{msg: dashDash(err.Error())}
	}
	if fs.NArg() > 0 {
		return r, usagef("unexpected argument %q (every setting is a --flag)", fs.Arg(0))
	}
	if err := layerSettings(fs, c.server); err != nil {
		return r, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range c.required {
		if !set[name] {
			hint := "or " + envName(name)
			if c.server {
				hint += `, or "` + name + `" in --config`
			}
			return r, usagef("missing required flag --%s (%s)", name, hint)
		}
	}
	logger, err := common.logger(s.stderr)
	if err != nil {
		return r, err
	}
	s.log = logger
	return r, nil
}

// dashDash makes the flag package's messages use the --name spelling that
// help and the README use.
func dashDash(msg string) string {
	for _, p := range []string{"flag -", "defined: -", "argument: -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	return msg
}

// writeHelp prints the usage line, description, flags and examples.
func (c *command) writeHelp(w io.Writer, r runner) {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	var common commonFlags
	common.register(fs, c.server, c.quietLogs)
	r.flags(fs)
	fmt.Fprintf(w, "Usage: logplayer %s %s\n\n%s\n", c.name, c.synopsis, strings.TrimSpace(c.about))
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	required := map[string]bool{}
	for _, n := range c.required {
		required[n] = true
	}
	fmt.Fprintln(w, "\nFlags:")
	for _, n := range names {
		f := fs.Lookup(n)
		typ, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", n)
		if typ != "" {
			fmt.Fprintf(w, " %s", typ)
		}
		fmt.Fprintf(w, "\n      %s", usage)
		switch {
		case required[n]:
			fmt.Fprint(w, " (required)")
		case f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s":
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		if _, noEnv := f.Value.(noEnvValue); !noEnv {
			fmt.Fprintf(w, " [env %s]", envName(n))
		}
		fmt.Fprintln(w)
	}
	if len(c.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}
