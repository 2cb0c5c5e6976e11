package main

import (
	"context"
	"flag"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

type eventsCmd struct {
	targetFlags
	dataDir string
}

func (c *eventsCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "target `id` (the LogPlayer's name for this target)")
	fs.Var(&c.addr, "addr", "gRPC `address` to serve (Target service)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` of the events' bbolt file")
	fs.Var(&c.topics, "topics", "`topics` this target owns, comma-separated (default: "+demo.OrdersTopic+","+demo.InventoryTopic+")")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	c.tls.Register(fs)
}

func (c *eventsCmd) Run(ctx context.Context, s *cli.Sys) error {
	topics := c.topics.Items
	if len(topics) == 0 {
		topics = []string{demo.OrdersTopic, demo.InventoryTopic}
	}
	return c.serve(ctx, s, nil, func(reg prometheus.Registerer) (*serve.OpenTarget, error) { // no Shard reads to authorize
		el, st, err := demo.OpenEventLogDir(c.dataDir)
		if err != nil {
			return nil, err
		}
		return serve.StoreTarget(target.Config{TargetID: types.TargetID(c.id), Store: el, Topics: topics, Logger: s.Log, Registerer: reg},
			el.Close, "events target serving", "dir", c.dataDir, "topics", topics, "lsn", st.AppliedLSN)
	})
}
