// Package raftlog adapts hashicorp/raft's hclog output to log/slog.
//
// Raft logs a great deal at DEBUG; the adapter drops everything below its
// level (Info by default), so a node's log carries raft's elections,
// snapshots and membership changes and nothing chattier. It has no
// goroutines; every call writes through to the wrapped *slog.Logger.
package raftlog

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// Logger is an hclog.Logger writing to a *slog.Logger.
type Logger struct {
	sl    *slog.Logger
	name  string
	args  []any
	level *atomic.Int32 // hclog.Level, shared by loggers derived with With/Named
}

var _ hclog.Logger = (*Logger)(nil)

// New returns an adapter writing to sl (slog.Default() when nil) that keeps
// records at level and above; hclog.NoLevel means hclog.Info.
func New(sl *slog.Logger, level hclog.Level) *Logger {
	if sl == nil {
		sl = slog.Default()
	}
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	l := &Logger{sl: sl, level: new(atomic.Int32)}
	l.level.Store(int32(level))
	return l
}

func slogLevel(l hclog.Level) slog.Level {
	switch {
	case l <= hclog.Debug:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	case l == hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// Log writes msg with key/value args when level is enabled.
func (l *Logger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level < hclog.Level(l.level.Load()) {
		return
	}
	all := make([]any, 0, len(l.args)+len(args)+2)
	if l.name != "" {
		all = append(all, "component", l.name)
	}
	all = append(all, l.args...)
	all = append(all, args...)
	l.sl.Log(context.Background(), slogLevel(level), msg, all...)
}

func (l *Logger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *Logger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *Logger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *Logger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *Logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *Logger) enabled(level hclog.Level) bool { return level >= hclog.Level(l.level.Load()) }

func (l *Logger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *Logger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *Logger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *Logger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *Logger) IsError() bool { return l.enabled(hclog.Error) }

// ImpliedArgs returns the args added with With.
func (l *Logger) ImpliedArgs() []any { return l.args }

// With returns a logger that adds args to every record.
func (l *Logger) With(args ...any) hclog.Logger {
	c := *l
	c.args = append(append([]any(nil), l.args...), args...)
	return &c
}

// Name returns the dotted sub-logger name.
func (l *Logger) Name() string { return l.name }

// Named returns a sub-logger whose name is appended to this one's.
func (l *Logger) Named(name string) hclog.Logger {
	c := *l
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

// ResetNamed returns a sub-logger with exactly this name.
func (l *Logger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

// SetLevel changes the level of this logger and all derived from it.
func (l *Logger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }

// GetLevel returns the current level.
func (l *Logger) GetLevel() hclog.Level { return hclog.Level(l.level.Load()) }

// StandardLogger returns a *log.Logger writing through this adapter.
func (l *Logger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer whose lines become records; a leading
// "[LEVEL]" tag as raft's older code writes picks the level, else Info.
func (l *Logger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writer{l}
}

type writer struct{ l *Logger }

func (w writer) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := hclog.Info
	for tag, lv := range map[string]hclog.Level{
		"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info,
		"[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error,
	} {
		if rest, ok := strings.CutPrefix(line, tag); ok {
			level, line = lv, strings.TrimSpace(rest)
			break
		}
	}
	w.l.Log(level, line)
	return len(p), nil
}
