package bench

import (
	"encoding/json"
	"os"
	"runtime/pprof"
	"strings"
)

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
