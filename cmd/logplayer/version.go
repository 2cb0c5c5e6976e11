package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version = "dev"

func init() {
	register(&command{
		name:     "version",
		summary:  "print the version, commit and Go version",
		synopsis: "",
		about:    "Prints the build's version (set with -ldflags \"-X main.version=...\"), its VCS commit when known, and the Go version.",
		examples: []string{"logplayer version"},
		new:      func() runner { return &versionCmd{} },
	})
}

type versionCmd struct{}

func (*versionCmd) flags(*flag.FlagSet) {}

func (*versionCmd) run(_ context.Context, s *sys) error {
	commit := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" {
				commit = kv.Value
			}
		}
	}
	fmt.Fprintf(s.stdout, "logplayer %s (commit %s, %s %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
