package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

func init() {
	app.Register(&cli.Command{
		Name:     "events",
		Server:   true,
		Required: []string{"id", "addr", "data-dir"},
		New:      func() cli.Runner { return &eventsCmd{} },
	})
}

type eventsCmd struct {
	id, dataDir string
	addr        cli.AddrValue
	metricsAddr cli.OptAddrValue
	topics      cli.StringList
	tls         cli.TLSServerFlags
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
	opts, metricsTLS, err := c.tls.Setup(s.Log, nil) // no Shard reads to authorize
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	el, err := demo.OpenEventLog(filepath.Join(c.dataDir, demo.EventLogFileName))
	if err != nil {
		return err
	}
	st, err := el.State()
	if err != nil {
		_ = el.Close()
		return err
	}
	reg := serve.ProcessRegistry()
	srv, closeAll, err := target.NewServerFor(target.Config{
		TargetID:   types.TargetID(c.id),
		Store:      el,
		Topics:     topics,
		Logger:     s.Log,
		Registerer: reg,
	}, el.Close)
	if errors.Is(err, target.ErrInvalidConfig) {
		return cli.Usagef("%v", err)
	}
	if err != nil {
		return err
	}
	ts, ms, err := serve.ListenTarget(c.id, c.addr.Addr, c.metricsAddr.Addr, reg, metricsTLS, srv.Register, closeAll, s.Log, targetServerOptions(opts)...)
	if err != nil {
		return err
	}
	defer ms.Stop()
	s.Log.Info("events target serving", "target", c.id, "addr", ts.Addr(), "dir", c.dataDir, "topics", topics, "lsn", st.AppliedLSN)
	<-ctx.Done()
	s.Log.Info("shutting down", "target", c.id)
	return ts.Stop()
}
