package main

// Settings: precedence flag > environment > config file > default.
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
// extends, the peers of the file.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// envPrefix starts the environment variable of every flag.
const envPrefix = "LOGPLAYER_"

// envName is the environment variable for flag name: "raft-addr" ->
// "LOGPLAYER_RAFT_ADDR".
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// repeatable marks a flag.Value whose Set adds a value instead of replacing.
type repeatable interface{ repeatable() }

// noEnvValue marks a flag.Value that is never read from the environment or a
// file (per-invocation data such as append's --topic).
type noEnvValue interface{ noEnv() }

// commonFlags are registered on every command.
type commonFlags struct {
	logLevel  levelValue
	logFormat choiceValue
	config    string
}

func (c *commonFlags) register(fs *flag.FlagSet, server, quiet bool) {
	c.logLevel = levelValue{slog.LevelInfo}
	if quiet {
		c.logLevel.level = slog.LevelWarn
	}
	c.logFormat = choiceValue{value: "text", choices: []string{"text", "json"}}
	fs.Var(&c.logLevel, "log-level", "log `level`: debug, info, warn or error")
	fs.Var(&c.logFormat, "log-format", "log `format`: text or json (logs go to stderr)")
	if server {
		fs.StringVar(&c.config, "config", "", "JSON config `file` (keys are flag names; see the README)")
	}
}

// logger builds the process logger on w from the log flags.
func (c *commonFlags) logger(w io.Writer) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: c.logLevel.level}
	if c.logFormat.value == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// fillUnset sets each flag the command line left unset from its environment
// variable, then (when withFile) from the config file. It returns, for every
// flag, where its value came from: "flag", "env", "file" or "" (default).
func fillUnset(fs *flag.FlagSet, getenv func(string) string, withFile bool) (map[string]string, error) {
	src := map[string]string{}
	fs.Visit(func(f *flag.Flag) { src[f.Name] = "flag" })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || src[f.Name] != "" {
			return
		}
		if _, no := f.Value.(noEnvValue); no {
			return
		}
		name := envName(f.Name)
		v := getenv(name)
		if v == "" {
			return
		}
		values := []string{v}
		if _, ok := f.Value.(repeatable); ok {
			values = strings.Fields(v)
		}
		for _, one := range values {
			if e := f.Value.Set(one); e != nil {
				err = usagef("invalid value %q in %s: %v", one, name, e)
				return
			}
		}
		src[f.Name] = "env"
	})
	if err != nil || !withFile {
		return src, err
	}
	path := fs.Lookup("config").Value.String()
	if path == "" {
		return src, nil
	}
	settings, err := readConfigFile(path)
	if err != nil {
		return src, err
	}
	for _, s := range settings {
		f := fs.Lookup(s.name)
		if f == nil || s.name == "config" {
			return src, usagef("config file %s: unknown setting %q (keys are this command's flag names)", path, s.name)
		}
		if _, no := f.Value.(noEnvValue); no {
			return src, usagef("config file %s: %q cannot be set in a file", path, s.name)
		}
		if src[s.name] != "" {
			continue
		}
		if _, ok := f.Value.(repeatable); !ok && len(s.values) > 1 {
			return src, usagef("config file %s: %q takes one value, not a list", path, s.name)
		}
		for _, v := range s.values {
			if e := f.Value.Set(v); e != nil {
				return src, usagef("config file %s: invalid value %q for %q: %v", path, v, s.name, e)
			}
		}
		src[s.name] = "file"
	}
	return src, nil
}

// setting is one key of a config file with its values as command-line text.
type setting struct {
	name   string
	values []string
}

// readConfigFile parses the JSON config format described at the top of this
// file, keeping the keys' order so errors are reported deterministically.
func readConfigFile(path string) ([]setting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("config file: %v", err)
	}
	return parseConfig(path, data)
}

func parseConfig(path string, data []byte) ([]setting, error) {
	bad := func(format string, args ...any) error {
		return usagef("config file %s: %s", path, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, bad("not a JSON object of settings (%v)", jsonErr(err, "does not start with {"))
	}
	var out []setting
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("malformed JSON: %v", err)
		}
		key := tok.(string) // an object key is always a string
		if seen[key] {
			return nil, bad("%q is set twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad("malformed JSON at %q: %v", key, err)
		}
		values, err := configValues(raw)
		if err != nil {
			return nil, bad("%q: %v", key, err)
		}
		out = append(out, setting{name: key, values: values})
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("unexpected data after the settings object")
	}
	return out, nil
}

func jsonErr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// configValues turns one JSON value into command-line text: a scalar is one
// value, an array of scalars several.
func configValues(raw json.RawMessage) ([]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil {
		var out []string
		for _, item := range list {
			v, err := scalar(item)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	v, err := scalar(raw)
	if err != nil {
		return nil, err
	}
	return []string{v}, nil
}

func scalar(raw json.RawMessage) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch t := v.(type) {
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	case bool:
		return fmt.Sprint(t), nil
	default:
		return "", fmt.Errorf("want a string, number, boolean or a list of them, not %s", raw)
	}
}
