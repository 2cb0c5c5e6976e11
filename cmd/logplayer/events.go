package main

import (
	"context"
	"flag"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

func init() {
	register(&command{
		name:     "events",
		summary:  "run the demo's events target (every orders and inventory event kept on bbolt)",
		synopsis: "--id ID --addr HOST:PORT --data-dir DIR [--topics T,...] [flags]",
		about: `
Runs the demo's events target as a process of its own (logplayer dev serves it
in memory): it keeps every message it applies, by LSN, with its topic, offset,
key, value and headers, in a bbolt file (events.db in --data-dir), and its
applied LSN and topic offsets in the same bbolt transaction. It serves the
Target service (the LogPlayer delivers to it) on --addr.

By default it owns topics "orders" and "inventory"; any message of them is
accepted. A file in --data-dir that is not an event log is refused. Stops
gracefully on SIGINT or SIGTERM.`,
		examples: []string{
			"logplayer events --id events --addr 127.0.0.1:7433 --data-dir data/events",
			"logplayer events --id audit --topics orders --addr 127.0.0.1:7434 --data-dir data/audit --metrics-addr 127.0.0.1:9434",
		},
		server:   true,
		required: []string{"id", "addr", "data-dir"},
		new:      func() runner { return &eventsCmd{} },
	})
}

type eventsCmd struct {
	targetFlags
	dataDir string
}

func (c *eventsCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "target `id` (the LogPlayer's name for this target)")
	fs.Var(&c.addr, "addr", "gRPC `address` to serve (Target service)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` of the events' bbolt file")
	fs.Var(&c.topics, "topics", "`topics` this target owns, comma-separated (default: "+demo.OrdersTopic+","+demo.InventoryTopic+")")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	c.tls.register(fs)
}

func (c *eventsCmd) run(ctx context.Context, s *sys) error {
	topics := c.topics.items
	if len(topics) == 0 {
		topics = []string{demo.OrdersTopic, demo.InventoryTopic}
	}
	return c.serve(ctx, s, nil, func(reg prometheus.Registerer) (*serve.OpenTarget, error) { // no Shard reads to authorize
		el, st, err := demo.OpenEventLogDir(c.dataDir)
		if err != nil {
			return nil, err
		}
		return serve.StoreTarget(target.Config{TargetID: types.TargetID(c.id), Store: el, Topics: topics, Logger: s.log, Registerer: reg},
			el.Close, "events target serving", "dir", c.dataDir, "topics", topics, "lsn", st.AppliedLSN)
	})
}
