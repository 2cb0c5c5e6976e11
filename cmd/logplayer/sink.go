package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/types"
)

func init() {
	app.Register(&cli.Command{
		Name:     "sink postgres",
		Server:   true,
		Required: []string{"id", "addr", "dsn", "topics"},
		New:      func() cli.Runner { return &sinkCmd{dialect: sqlstore.Postgres} },
	})
	app.Register(&cli.Command{
		Name:     "sink sqlite",
		Server:   true,
		Required: []string{"id", "addr", "path", "topics"},
		New:      func() cli.Runner { return &sinkCmd{dialect: sqlstore.SQLite} },
	})
}

type sinkCmd struct {
	dialect           sqlstore.Dialect
	id, dsn, path     string
	prefix            string
	addr              cli.AddrValue
	metricsAddr       cli.OptAddrValue
	topics            cli.StringList
	mode, onBad       cli.ChoiceValue
	maxKey, maxValue  cli.SizeValue
	skipLSNs          lsnList
	tls               cli.TLSServerFlags
	timeout, lockWait time.Duration
}

func (c *sinkCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "target `id` (the LogPlayer's name for this target; the key of its state row)")
	fs.Var(&c.addr, "addr", "gRPC `address` to serve (Target service)")
	if c.dialect == sqlstore.SQLite {
		fs.StringVar(&c.path, "path", "", "SQLite database `file` (created when missing)")
	} else {
		fs.StringVar(&c.dsn, "dsn", "", "PostgreSQL connection string (`DSN`: postgres://user@host:port/db or key=value)")
	}
	fs.Var(&c.topics, "topics", "`topics` to store, comma-separated: one table each")
	fs.StringVar(&c.prefix, "table-prefix", "", "`prefix` of every table name ([a-z0-9_])")
	c.mode = cli.ChoiceValue{Value: "append", Choices: []string{"append", "upsert"}}
	fs.Var(&c.mode, "mode", "`append` (a row per message) or upsert (kv-schema mutations into a key/value table)")
	c.onBad = cli.ChoiceValue{Value: "refuse", Choices: []string{"refuse", "dead-letter"}}
	fs.Var(&c.onBad, "on-bad-message", "`refuse` (permanent refusal at its LSN) or dead-letter (into logplayer_dead_letter, and go on)")
	fs.Var(&c.maxKey, "max-key-bytes", "longest key stored (`size`; default 2KiB in upsert mode, no bound in append mode)")
	fs.Var(&c.maxValue, "max-value-bytes", "longest value stored (`size`; default no bound below the database's)")
	fs.Var(&c.skipLSNs, "skip-lsn", "operator escape hatch after a permanent refusal: drop the data of these `LSNs` (comma-separated; see README)")
	fs.DurationVar(&c.timeout, "db-timeout", sqlstore.DefaultTimeout, "bound of one batch's SQL transaction; longer: the database is treated as lost")
	fs.DurationVar(&c.lockWait, "lock-timeout", sqlstore.DefaultLockTimeout, "how long to wait for the state row's lock held by another process")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	c.tls.Register(fs)
}

// openSink opens the SQL store of the command's flags.
func (c *sinkCmd) openSink(ctx context.Context, reg prometheus.Registerer) (*sqlstore.Store, error) {
	mc := sqlstore.MappingConfig{
		TargetID:      types.TargetID(c.id),
		Topics:        c.topics.Items,
		TablePrefix:   c.prefix,
		Mode:          sqlstore.Append,
		OnBadMessage:  sqlstore.Refuse,
		MaxKeyBytes:   int(c.maxKey.Bytes),
		MaxValueBytes: int(c.maxValue.Bytes),
	}
	if c.mode.Value == "upsert" {
		mc.Mode = sqlstore.Upsert
	}
	if c.onBad.Value == "dead-letter" {
		mc.OnBadMessage = sqlstore.DeadLetter
	}
	st, err := sqlstore.OpenMapped(ctx, mc, sqlstore.Config{
		TargetID: types.TargetID(c.id), Dialect: c.dialect, DSN: c.dsn, Path: c.path,
		Timeout: c.timeout, LockTimeout: c.lockWait,
		Registerer: reg,
	})
	if errors.Is(err, sqlstore.ErrInvalidConfig) {
		return nil, cli.Usagef("%v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	return st, nil
}

func (c *sinkCmd) Run(ctx context.Context, s *cli.Sys) error {
	opts, metricsTLS, err := c.tls.Setup(s.Log, nil) // no Shard reads to authorize
	if err != nil {
		return err
	}
	reg := serve.ProcessRegistry()
	store, err := c.openSink(ctx, reg)
	if err != nil {
		return err
	}
	st, err := store.State()
	if err != nil {
		store.Close()
		return fmt.Errorf("sink: %w", err)
	}
	srv, closeAll, err := target.NewServerFor(target.Config{
		TargetID:   types.TargetID(c.id),
		Store:      store,
		Topics:     c.topics.Items,
		SkipLSNs:   c.skipLSNs.lsns,
		Logger:     s.Log,
		Registerer: reg,
	}, func() error { store.Close(); return nil })
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
	s.Log.Info("sink serving", "target", c.id, "addr", ts.Addr(), "db", c.dialect.String(),
		"topics", c.topics.Items, "lsn", st.AppliedLSN, "epoch", st.Epoch)
	<-ctx.Done()
	s.Log.Info("shutting down", "target", c.id)
	return ts.Stop()
}
