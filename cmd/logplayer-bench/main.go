// Command logplayer-bench holds the benchmark tools the shipped logplayer
// binary does not need, so that it links no plotting library. Today one:
//
//	logplayer-bench chart --in store.json --out docs
//
// reads the JSON 'logplayer bench store --json' wrote and writes, into
// --out, one PNG per figure against the client count, a line per system:
// bench-store-txps.png (tx/s), bench-store-p50.png and bench-store-p99.png
// (latency, log scale). scripts/bench.sh writes them beside
// docs/BENCHMARKS.md.
//
// Exit codes: 0 success; 1 runtime error; 2 usage error.
//
// Goroutines: main only.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/logplayer/logplayer/logstore/bench"
	"github.com/logplayer/logplayer/logstore/bench/chart"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// errUsage marks a usage error (exit code 2).
var errUsage = errors.New("usage: logplayer-bench chart --in FILE [--out DIR]")

func run(args []string, stdout, stderr io.Writer) int {
	err := errUsage
	if len(args) > 0 && args[0] == "chart" {
		err = chartCmd(args[1:], stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprintln(stderr, "logplayer-bench:", err)
	return 1
}

func chartCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the `file` 'logplayer bench store --json' wrote")
	out := fs.String("out", ".", "`directory` to write the PNGs into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || fs.NArg() > 0 {
		return errUsage
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var t bench.Table
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("chart: %s: %w", *in, err)
	}
	paths, err := chart.Write(t, *out)
	for _, p := range paths {
		fmt.Fprintln(stdout, p)
	}
	return err
}
