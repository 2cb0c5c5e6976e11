// Command logplayer is the project's one binary: the server roles (store,
// player, shard), the all-in-one dev mode with its demo workload, the
// operator CLI (append, tail, status, cluster), the benchmarks and version.
//
// Exit codes: 0 success; 1 runtime error (unreachable cluster, refused
// append, failed demo check); 2 usage error (unknown flag, bad value, missing
// required flag). An error is one line on stderr, a usage error adds a hint.
//
// Settings come from flags, then environment variables (LOGPLAYER_<FLAG>,
// upper snake case), then, for the server roles, a JSON config file
// (--config), then defaults, layered by github.com/peterbourgon/ff/v3; see
// internal/cli/config.go for the file format. The command table, help and
// settings are internal/cli's; app.go names the commands and each command
// file registers one, its help in help/<command with dashes>.txt.
//
// Goroutines: main runs one subcommand; signal.NotifyContext cancels its
// context on SIGINT or SIGTERM, and every server role then shuts down
// gracefully. The roles' own goroutines are listed in their files.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/logplayer/logplayer/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], &cli.Sys{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
