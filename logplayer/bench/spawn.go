package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
)

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
