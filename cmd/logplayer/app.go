package main

import (
	"embed"
	"io/fs"

	"github.com/logplayer/logplayer/internal/cli"
)

// helpFiles hold each command's help prose, help/<command with dashes>.txt
// in the format of internal/cli/help.go:ParseHelp.
//
//go:embed help/*.txt
var helpFiles embed.FS

// app is the logplayer command table; each command file registers its
// commands from init.
var app = &cli.App{
	Name:      "logplayer",
	EnvPrefix: "LOGPLAYER",
	Summary:   "atomic multi-topic writes and exactly-once delivery.",
	Footer:    "Quick start: logplayer dev --demo 30s",
	// The order help lists the commands in: the servers, the operator
	// commands, the rest.
	Order: []string{
		"dev", "store", "player", "shard", "events", "sink postgres", "sink sqlite",
		"append", "tail", "status", "cluster add", "cluster remove", "cluster transfer",
		"group delete", "topic create", "topic describe", "topic list",
		"target add", "target remove", "target list", "target describe", "target reset", "players",
		"target clone", // issue #29 (cmd/logplayer/targetclone.go)
		"backup save", "backup restore", "certs", "demo", "bench store", "bench player", "bench sink", "version",
	},
	HelpFiles: helpDir(),
}

// helpDir is the help directory of helpFiles.
func helpDir() fs.FS {
	sub, err := fs.Sub(helpFiles, "help")
	if err != nil {
		panic(err) // "help" is a valid path
	}
	return sub
}
