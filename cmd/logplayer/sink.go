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

type sinkCmd struct {
	targetFlags
	dialect           sqlstore.Dialect
	dsn, path         string
	prefix            string
	mode, onBad       cli.ChoiceValue
	maxKey, maxValue  cli.SizeValue
	skipLSNs          lsnList
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

// openSink opens the SQL store of the command's flags and reads its State.
func (c *sinkCmd) openSink(ctx context.Context, reg prometheus.Registerer) (*sqlstore.Store, target.State, error) {
	mc := sqlstore.MappingConfig{TargetID: types.TargetID(c.id), Topics: c.topics.Items, TablePrefix: c.prefix,
		Mode: sqlstore.ModeNamed(c.mode.Value), OnBadMessage: sqlstore.BadMessageNamed(c.onBad.Value),
		MaxKeyBytes: int(c.maxKey.Bytes), MaxValueBytes: int(c.maxValue.Bytes)}
	store, st, err := sqlstore.OpenMappedState(ctx, mc, sqlstore.Config{TargetID: types.TargetID(c.id), Dialect: c.dialect, DSN: c.dsn, Path: c.path,
		Timeout: c.timeout, LockTimeout: c.lockWait, Registerer: reg})
	if err != nil && !errors.Is(err, sqlstore.ErrInvalidConfig) {
		err = fmt.Errorf("sink: %w", err)
	}
	return store, st, err
}

func (c *sinkCmd) Run(ctx context.Context, s *cli.Sys) error {
	return c.serve(ctx, s, nil, func(reg prometheus.Registerer) (*serve.OpenTarget, error) { // no Shard reads to authorize
		store, st, err := c.openSink(ctx, reg)
		if err != nil {
			return nil, err
		}
		return serve.StoreTarget(target.Config{TargetID: types.TargetID(c.id), Store: store, Topics: c.topics.Items, SkipLSNs: c.skipLSNs.lsns,
			Logger: s.Log, Registerer: reg}, func() error { store.Close(); return nil },
			"sink serving", "db", c.dialect.String(), "topics", c.topics.Items, "lsn", st.AppliedLSN, "epoch", st.Epoch)
	})
}
