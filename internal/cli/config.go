package cli

// Settings: precedence flag > environment > config file > default. The
// layering is github.com/peterbourgon/ff/v3's ff.Parse over the standard
// flag package; this file holds what ff leaves to its caller: the JSON file
// format and the two kinds of flag it does not know about.
//
// Environment: every flag --some-name can be set as LOGPLAYER_SOME_NAME.
// A repeatable flag (--target, --peer) takes several values separated by
// whitespace.
//
// Config file (server roles only, --config FILE or LOGPLAYER_CONFIG): one
// JSON object whose keys are flag names without dashes and whose values are
// what you would write on the command line: a string, a number or a boolean,
// or an array of those for a repeatable flag. Unknown keys are an error, so a
// typo does not silently fall back to a default. Example for `logplayer store`:
//
//	{
//	  "id": "n1",
//	  "raft-addr": "127.0.0.1:7410",
//	  "api-addr": "127.0.0.1:7400",
//	  "data-dir": "/var/lib/logplayer/n1",
//	  "peer": ["n1=127.0.0.1:7410/127.0.0.1:7400", "n2=127.0.0.1:7411/127.0.0.1:7401"],
//	  "metrics-addr": "127.0.0.1:9400"
//	}
//
// Each flag takes all its values from the one source with the highest
// precedence that sets it: a --peer on the command line replaces, not
// extends, the peers of the file (ff sets a flag from the environment or the
// file only when no earlier source set it).

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"strings"

	"github.com/peterbourgon/ff/v3"
)

// EnvName is the environment variable for flag name: "raft-addr" ->
// "LOGPLAYER_RAFT_ADDR" (EnvPrefix "LOGPLAYER"), as ff.WithEnvVarPrefix
// derives it.
func (a *App) EnvName(flagName string) string {
	return a.EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// RepeatableValue marks a flag.Value whose Set adds a value instead of
// replacing.
type RepeatableValue interface{ Repeatable() }

// NoEnvValue marks a flag.Value that is never read from the environment or a
// file (per-invocation data such as append's --topic).
type NoEnvValue interface{ NoEnv() }

// commonFlags are registered on every command.
type commonFlags struct {
	logLevel  levelValue
	logFormat ChoiceValue
	config    string
}

func (c *commonFlags) register(fs *flag.FlagSet, server, quiet bool) {
	c.logLevel = levelValue{slog.LevelInfo}
	if quiet {
		c.logLevel.level = slog.LevelWarn
	}
	c.logFormat = ChoiceValue{Value: "text", Choices: []string{"text", "json"}}
	fs.Var(&c.logLevel, "log-level", "log `level`: debug, info, warn or error")
	fs.Var(&c.logFormat, "log-format", "log `format`: text or json (logs go to stderr)")
	if server {
		fs.StringVar(&c.config, "config", "", "JSON config `file` (keys are flag names; see the README)")
	}
}

// logger builds the process logger on w from the log flags.
func (c *commonFlags) logger(w io.Writer) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: c.logLevel.level}
	if c.logFormat.Value == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// layerSettings sets the flags the command line (already parsed into fs)
// left unset from their environment variables and then, when withFile, from
// the --config file, with ff.Parse. The command line is parsed before, by
// the flag package, so that the repeatable and per-invocation flags can be
// wrapped (settingValue) between the command line and the environment.
func (a *App) layerSettings(fs *flag.FlagSet, withFile bool) error {
	fs.VisitAll(func(f *flag.Flag) {
		_, multi := f.Value.(RepeatableValue)
		_, once := f.Value.(NoEnvValue)
		if multi || once {
			f.Value = &settingValue{Value: f.Value, perInvocation: once}
		}
	})
	opts := []ff.Option{ff.WithEnvVarPrefix(a.EnvPrefix)}
	if withFile {
		opts = append(opts, ff.WithConfigFileFlag("config"), ff.WithConfigFileParser(configParser(fs)))
	}
	// The arguments are parsed already: ff.Parse's own fs.Parse(nil) sets
	// nothing, and ff counts what the command line set as provided.
	err := ff.Parse(fs, nil, opts...)
	var ue *UsageError
	var pe *iofs.PathError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue):
		return err
	case errors.As(err, &pe):
		return Usagef("config file: %v", err)
	default: // a bad environment variable; ff's message names it
		return Usagef("%s", strings.TrimPrefix(err.Error(), "error parsing environment variables: "))
	}
}

// settingValue wraps a repeatable or per-invocation flag once the command
// line is parsed. ff sets a flag with one Set per environment variable (or
// file value), so Set splits the variable on whitespace for a repeatable
// flag and ignores it for a per-invocation one (the file parser refuses
// those before).
type settingValue struct {
	flag.Value
	perInvocation bool
}

func (v *settingValue) Set(s string) error {
	if v.perInvocation {
		return nil
	}
	for _, one := range strings.Fields(s) {
		if err := v.Value.Set(one); err != nil {
			return err
		}
	}
	return nil
}

// configParser is an ff.ConfigFileParser for the JSON format described at
// the top of this file. It is stricter than ff.JSONParser: keys are flag
// names of fs (not nested objects), each set once, a list only for a
// repeatable flag, and nothing after the object; errors name the file and
// come in the file's key order.
func configParser(fs *flag.FlagSet) ff.ConfigFileParser {
	return func(r io.Reader, set func(name, value string) error) error {
		path := fs.Lookup("config").Value.String()
		bad := func(format string, args ...any) error {
			return Usagef("config file %s: %s", path, fmt.Sprintf(format, args...))
		}
		settings, err := parseConfig(r)
		if err != nil {
			return bad("%v", err)
		}
		for _, s := range settings {
			f := fs.Lookup(s.name)
			if f == nil || s.name == "config" {
				return bad("unknown setting %q (keys are this command's flag names)", s.name)
			}
			sv, multi := f.Value.(*settingValue)
			switch {
			case multi && sv.perInvocation:
				return bad("%q cannot be set in a file", s.name)
			case !multi && len(s.values) > 1:
				return bad("%q takes one value, not a list", s.name)
			}
			for _, v := range s.values {
				if err := set(s.name, v); err != nil {
					return bad("invalid value %q for %q: %v", v, s.name, errors.Unwrap(err))
				}
			}
		}
		return nil
	}
}

// setting is one key of a config file with its values as command-line text.
type setting struct {
	name   string
	values []string
}

// parseConfig reads the settings object, keeping the keys' order so errors
// are reported deterministically. A null or an empty list sets nothing.
func parseConfig(r io.Reader) ([]setting, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if tok, err := dec.Token(); tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object of settings (%v)", cmp.Or(err, errors.New("does not start with {")))
	}
	var out []setting
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("malformed JSON: %v", err)
		}
		key := tok.(string) // an object key is always a string
		if seen[key] {
			return nil, fmt.Errorf("%q is set twice", key)
		}
		seen[key] = true
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("malformed JSON at %q: %v", key, err)
		}
		items, ok := v.([]any)
		if !ok && v != nil {
			items = []any{v}
		}
		s := setting{name: key}
		for _, item := range items {
			switch item.(type) {
			case string, json.Number, bool:
				s.values = append(s.values, fmt.Sprint(item))
			default:
				return nil, fmt.Errorf("%q: want a string, number, boolean or a list of them", key)
			}
		}
		out = append(out, s)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the settings object")
	}
	return out, nil
}
