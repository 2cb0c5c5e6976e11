package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
)

// ParseChildSpec reads the arguments a child made by SpawnSelf was given
// (one JSON list), for ServeChild.
func ParseChildSpec(spec string) ([]string, error) {
	var args []string
	if err := json.Unmarshal([]byte(spec), &args); err != nil {
		return nil, err
	}
	return args, nil
}

// SpawnSelfExecutable is SpawnSelf of this process's executable.
func SpawnSelfExecutable(prefix []string, stderr io.Writer, targetProcs int) (func(args ...string) *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return SpawnSelf(exe, prefix, stderr, targetProcs), nil
}

// SpawnSelf returns a Config.Spawn that runs a child as exe with the
// arguments prefix and then the child's arguments as one JSON list (the
// command that calls ServeChild with them), its standard error to stderr.
// With targetProcs > 0 a target child runs with GOMAXPROCS=targetProcs.
func SpawnSelf(exe string, prefix []string, stderr io.Writer, targetProcs int) func(args ...string) *exec.Cmd {
	return func(args ...string) *exec.Cmd {
		spec, err := json.Marshal(args)
		if err != nil {
			panic(err) // a []string always marshals
		}
		cmd := exec.Command(exe, append(slices.Clone(prefix), string(spec))...)
		cmd.Stderr = stderr
		if targetProcs > 0 && slices.Contains(args, "target") {
			cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", targetProcs))
		}
		return cmd
	}
}
