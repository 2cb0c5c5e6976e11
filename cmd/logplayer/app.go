package main

import (
	"embed"
	"io/fs"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/target/sqlstore"
)

// helpFiles hold each command's help prose, help/<command with dashes>.txt
// in the format of internal/cli/help.go:ParseHelp.
//
//go:embed help/*.txt
var helpFiles embed.FS

// app is the logplayer command line: the commands below, their help from
// helpFiles.
var app = &cli.App{
	Name:      "logplayer",
	EnvPrefix: "LOGPLAYER",
	Summary:   "atomic multi-topic writes and exactly-once delivery.",
	Footer:    "Quick start: logplayer dev --demo 30s",
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

// commands are logplayer's commands, in the order help lists them: the
// servers, the operator commands, the rest. Each runner is in the file the
// comment names; its help prose in help/<name with dashes>.txt.
var commands = []*cli.Command{
	{Name: "dev", QuietLogs: true, New: func() cli.Runner { return &devCmd{} }},                                                                                      // dev.go
	{Name: "store", Server: true, Required: []string{"id", "data-dir", "raft-addr", "api-addr"}, New: func() cli.Runner { return &storeCmd{} }},                      // store.go
	{Name: "player", Server: true, Required: []string{"store"}, New: func() cli.Runner { return &playerCmd{} }},                                                      // player.go
	{Name: "shard", Server: true, Required: []string{"id", "addr", "data-dir"}, New: func() cli.Runner { return &shardCmd{} }},                                       // shard.go
	{Name: "events", Server: true, Required: []string{"id", "addr", "data-dir"}, New: func() cli.Runner { return &eventsCmd{} }},                                     // events.go
	{Name: "sink postgres", Server: true, Required: []string{"id", "addr", "dsn", "topics"}, New: func() cli.Runner { return &sinkCmd{dialect: sqlstore.Postgres} }}, // sink.go
	{Name: "sink sqlite", Server: true, Required: []string{"id", "addr", "path", "topics"}, New: func() cli.Runner { return &sinkCmd{dialect: sqlstore.SQLite} }},    // sink.go
	{Name: "append", New: func() cli.Runner { return &appendCmd{} }},                                                                                                 // append.go
	{Name: "tail", New: func() cli.Runner { return &tailCmd{} }},                                                                                                     // tail.go
	{Name: "status", New: func() cli.Runner { return &statusCmd{} }},                                                                                                 // status.go
	{Name: "cluster add", Required: []string{"id", "raft-addr", "api-addr"}, New: func() cli.Runner { return &clusterCmd{op: "add"} }},                               // cluster.go
	{Name: "cluster remove", Required: []string{"id"}, New: func() cli.Runner { return &clusterCmd{op: "remove"} }},                                                  // cluster.go
	{Name: "cluster transfer", New: func() cli.Runner { return &clusterCmd{op: "transfer"} }},                                                                        // cluster.go
	{Name: "group delete", Required: []string{"group"}, New: func() cli.Runner { return &groupCmd{} }},                                                               // group.go
	{Name: "topic create", New: func() cli.Runner { return &topicCreateCmd{} }},                                                                                      // topic.go
	{Name: "topic describe", Required: []string{"topic"}, New: func() cli.Runner { return &topicDescribeCmd{} }},                                                     // topic.go
	{Name: "topic list", New: func() cli.Runner { return &topicListCmd{} }},                                                                                          // topic.go
	{Name: "target add", Required: []string{"id", "target-addr", "topics"}, New: func() cli.Runner { return &targetCmd{op: "add"} }},                                 // target.go
	{Name: "target remove", Required: []string{"id"}, New: func() cli.Runner { return &targetCmd{op: "remove"} }},                                                    // target.go
	{Name: "target list", New: func() cli.Runner { return &targetCmd{op: "list"} }},                                                                                  // target.go
	{Name: "target describe", Required: []string{"id"}, New: func() cli.Runner { return &targetCmd{op: "describe"} }},                                                // target.go
	{Name: "target reset", Required: []string{"data-dir"}, New: func() cli.Runner { return &targetResetCmd{} }},                                                      // targetreset.go
	{Name: "players", New: func() cli.Runner { return &targetCmd{op: "players"} }},                                                                                   // target.go
	{Name: "target clone", Required: []string{"from", "to"}, New: func() cli.Runner { return &targetCloneCmd{} }},                                                    // targetclone.go
	{Name: "backup save", Required: []string{"file"}, New: func() cli.Runner { return &backupCmd{op: "save"} }},                                                      // backup.go
	{Name: "backup restore", Required: []string{"file", "data-dir", "peer"}, New: func() cli.Runner { return &backupCmd{op: "restore"} }},                            // backup.go
	{Name: "certs", Required: []string{"dir"}, New: func() cli.Runner { return &certsCmd{} }},                                                                        // certs.go
	{Name: "demo", Required: []string{"shard"}, New: func() cli.Runner { return &demoCmd{} }},                                                                        // democmd.go
	{Name: "bench store", New: func() cli.Runner { return &benchStoreCmd{} }},                                                                                        // bench.go
	{Name: "bench player", New: func() cli.Runner { return &benchPlayerCmd{} }},                                                                                      // bench.go
	{Name: "bench sink", Required: []string{"dsn"}, New: func() cli.Runner { return &benchSinkCmd{} }},                                                               // benchsink.go
	{Name: "version", New: func() cli.Runner { return &versionCmd{} }},                                                                                               // version.go
}

func init() {
	for _, c := range commands {
		app.Register(c)
	}
}
