// Package cli is the command-line framework of the logplayer binary
// (cmd/logplayer): a table of subcommands of one or two words ("append",
// "cluster add"), their dispatch, help and usage errors with fixed exit
// codes (this file); settings layered from flags, the environment and a
// JSON config file (config.go); help prose read from text files
// (help.go); the flag value types (flagvalues.go); and the flag sets
// several commands share: TLS and authorization (tlsflags.go) and the
// connection to a LogStore (connect.go).
//
// A command file registers a Command whose New makes a Runner: Flags binds
// its settings to a flag.FlagSet, Run does the work with what Sys gives.
//
// Goroutines: none; App.Run runs one command on the caller's goroutine.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"sort"
	"strings"
)

// Exit codes of every subcommand.
const (
	ExitOK      = 0
	ExitRuntime = 1 // the command ran and failed
	ExitUsage   = 2 // the command line (or env, or config file) is wrong
)

// Sys is what a command may touch of the outside world; tests pass their own.
// The environment is the process's (ff reads it; tests use t.Setenv).
type Sys struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Log is set up from --log-level and --log-format before Run is called.
	Log *slog.Logger
}

// Runner is one parsed subcommand: Flags binds its settings, Run does the work.
type Runner interface {
	Flags(fs *flag.FlagSet)
	Run(ctx context.Context, s *Sys) error
}

// Command describes a subcommand for dispatch and help.
type Command struct {
	Name string // "append", or two words for a group: "cluster add"
	// Help is read from App.HelpFiles by Register when it is empty.
	Help Help
	// Server roles also read --config; all commands read the environment.
	Server bool
	// QuietLogs makes warn the default log level (dev: its own output is
	// the point, the components' info logs would drown it).
	QuietLogs bool
	Required  []string // flags that must be set by some source
	New       func() Runner
}

// UsageError is a wrong command line: exit 2 with a hint.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// App is a program made of subcommands.
type App struct {
	Name      string // the program's name in messages: "logplayer"
	EnvPrefix string // the environment variables' prefix: "LOGPLAYER"
	Summary   string // what the program does, on the first line of help
	Footer    string // the last line of help
	// Order is the order help lists the commands in (the others last).
	Order []string
	// HelpFiles holds a command's help as <name with dashes>.txt
	// ("cluster-add.txt"), in ParseHelp's format.
	HelpFiles fs.FS

	commands []*Command
}

// Register adds c to the table (from each command file's init), with its
// help from HelpFiles unless c brings its own. A missing or malformed help
// file panics: the binary would not start.
func (a *App) Register(c *Command) {
	if c.Help.Summary == "" {
		h, err := a.readHelp(c.Name)
		if err != nil {
			panic(fmt.Sprintf("%s %s: %v", a.Name, c.Name, err))
		}
		c.Help = h
	}
	a.commands = append(a.commands, c)
	rank := func(name string) int {
		if i := slices.Index(a.Order, name); i >= 0 {
			return i
		}
		return len(a.Order)
	}
	slices.SortStableFunc(a.commands, func(x, y *Command) int { return rank(x.Name) - rank(y.Name) })
}

// Commands are the registered commands in help order.
func (a *App) Commands() []*Command { return a.commands }

// Lookup is the command named name, or nil.
func (a *App) Lookup(name string) *Command {
	for _, c := range a.commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// groups are the first words of two-word commands ("cluster", "bench").
func (a *App) isGroup(word string) bool {
	for _, c := range a.commands {
		if strings.HasPrefix(c.Name, word+" ") {
			return true
		}
	}
	return false
}

// Run dispatches args to a subcommand and returns the process exit code.
func (a *App) Run(ctx context.Context, args []string, s *Sys) int {
	if len(args) == 0 {
		fmt.Fprintf(s.Stderr, "%s: missing command\n", a.Name)
		fmt.Fprintf(s.Stderr, "Run '%s help' for the list of commands.\n", a.Name)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return a.Run(ctx, append(args[1:], "--help"), s)
		}
		a.writeCommandList(s.Stdout)
		return ExitOK
	case "-v", "-version", "--version":
		name = "version"
	}
	rest := args[1:]
	if a.isGroup(name) {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			if len(rest) > 0 && isHelpFlag(rest[0]) {
				a.writeGroupList(s.Stdout, name)
				return ExitOK
			}
			fmt.Fprintf(s.Stderr, "%s %s: missing subcommand (one of: %s)\n", a.Name, name, strings.Join(a.groupMembers(name), ", "))
			fmt.Fprintf(s.Stderr, "Run '%s %s --help' for usage.\n", a.Name, name)
			return ExitUsage
		}
		name, rest = name+" "+rest[0], rest[1:]
	}
	c := a.Lookup(name)
	if c == nil {
		fmt.Fprintf(s.Stderr, "%s: unknown command %q\n", a.Name, name)
		fmt.Fprintf(s.Stderr, "Run '%s help' for the list of commands.\n", a.Name)
		return ExitUsage
	}
	r, err := a.parse(c, rest, s)
	if errors.Is(err, flag.ErrHelp) {
		a.writeHelp(s.Stdout, c, r)
		return ExitOK
	}
	if err == nil {
		err = r.Run(ctx, s)
	}
	return a.report(s.Stderr, c, err)
}

// report prints err as one line (plus a hint for usage errors) and returns
// the exit code.
func (a *App) report(w io.Writer, c *Command, err error) int {
	if err == nil {
		return ExitOK
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "%s %s: %s\n", a.Name, c.Name, oneLine(ue.Msg))
		fmt.Fprintf(w, "Run '%s %s --help' for usage.\n", a.Name, c.Name)
		return ExitUsage
	}
	fmt.Fprintf(w, "%s %s: %s\n", a.Name, c.Name, oneLine(err.Error()))
	return ExitRuntime
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func isHelpFlag(a string) bool {
	return a == "-h" || a == "-help" || a == "--help"
}

func (a *App) groupMembers(group string) []string {
	var out []string
	for _, c := range a.commands {
		if after, ok := strings.CutPrefix(c.Name, group+" "); ok {
			out = append(out, after)
		}
	}
	return out
}

func (a *App) writeCommandList(w io.Writer) {
	fmt.Fprintf(w, "%s: %s\n\nUsage: %s <command> [flags]\n\nCommands:\n", a.Name, a.Summary, a.Name)
	width := 0
	for _, c := range a.commands {
		width = max(width, len(c.Name))
	}
	for _, c := range a.commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Help.Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags and examples.\n%s\n", a.Name, a.Footer)
}

func (a *App) writeGroupList(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage: %s %s <subcommand> [flags]\n\nSubcommands:\n", a.Name, group)
	for _, c := range a.commands {
		if strings.HasPrefix(c.Name, group+" ") {
			fmt.Fprintf(w, "  %-18s  %s\n", c.Name, c.Help.Summary)
		}
	}
	fmt.Fprintf(w, "\nRun '%s %s <subcommand> --help' for details.\n", a.Name, group)
}

// Parse parses args for the command named name as Run would, without
// running it (tests look at the Runner's settings).
func (a *App) Parse(name string, args []string, s *Sys) (Runner, error) {
	c := a.Lookup(name)
	if c == nil {
		return nil, fmt.Errorf("unknown command %q", name)
	}
	return a.parse(c, args, s)
}

// parse binds a fresh runner's flags, parses args, then has ff fill what
// args left unset from the environment and (server roles) the config file,
// and checks the required flags. It returns flag.ErrHelp for -h/--help.
func (a *App) parse(c *Command, args []string, s *Sys) (Runner, error) {
	r := c.New()
	fs := flag.NewFlagSet(a.Name+" "+c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var common commonFlags
	common.register(fs, c.Server, c.QuietLogs)
	r.Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return r, err
		}
		return r, &UsageError{Msg: dashDash(err.Error())}
	}
	if fs.NArg() > 0 {
		return r, Usagef("unexpected argument %q (every setting is a --flag)", fs.Arg(0))
	}
	if err := a.layerSettings(fs, c.Server); err != nil {
		return r, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range c.Required {
		if !set[name] {
			hint := "or " + a.EnvName(name)
			if c.Server {
				hint += `, or "` + name + `" in --config`
			}
			return r, Usagef("missing required flag --%s (%s)", name, hint)
		}
	}
	logger, err := common.logger(s.Stderr)
	if err != nil {
		return r, err
	}
	s.Log = logger
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
func (a *App) writeHelp(w io.Writer, c *Command, r Runner) {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	var common commonFlags
	common.register(fs, c.Server, c.QuietLogs)
	r.Flags(fs)
	fmt.Fprintf(w, "Usage: %s %s %s\n\n%s\n", a.Name, c.Name, c.Help.Synopsis, strings.TrimSpace(c.Help.About))
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	required := map[string]bool{}
	for _, n := range c.Required {
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
		if _, noEnv := f.Value.(NoEnvValue); !noEnv {
			fmt.Fprintf(w, " [env %s]", a.EnvName(n))
		}
		fmt.Fprintln(w)
	}
	if len(c.Help.Examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range c.Help.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}
