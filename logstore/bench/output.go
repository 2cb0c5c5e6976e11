package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
)

// ReportOptions are what a `logplayer bench store` run adds to Run.
type ReportOptions struct {
	// TLS runs the rows twice: plaintext, then over mutual TLS (WithTLS).
	TLS bool
	// JSONFile, when set, gets the plaintext table (WriteJSONFile).
	JSONFile string
	// CPUProfile, when set, gets a pprof CPU profile of the whole run
	// (StartCPUProfile).
	CPUProfile string
}

// RunReport runs cfg's rows (Run) as o says and prints each table on w
// (log is WithTLS's).
func RunReport(ctx context.Context, w io.Writer, log *slog.Logger, cfg Config, o ReportOptions) error {
	if o.CPUProfile != "" {
		stop, err := StartCPUProfile(o.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return WithTLS(w, log, o.TLS, func(sec *Security) error {
		cfg.Security = sec
		t, err := Run(ctx, cfg)
		if err != nil {
			return err
		}
		if o.JSONFile != "" && sec == nil { // the plaintext table: what 'logplayer-bench chart' draws
			if err := t.WriteJSONFile(o.JSONFile); err != nil {
				return err
			}
		}
		_, err = fmt.Fprint(w, t.String())
		return err
	})
}

// SystemNames lists Systems, comma-separated (for a flag's usage).
func SystemNames() string {
	var names []string
	for _, s := range Systems {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// StartCPUProfile starts a pprof CPU profile of the whole process into a
// new file at path; stop ends it and closes the file.
func StartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// WriteJSONFile writes t's rows as indented JSON to path (what
// 'logplayer-bench chart' draws).
func (t Table) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
