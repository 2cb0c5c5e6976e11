package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/types"
)

const sinkAbout = `
Runs a target that writes its topics into a SQL database exactly once, with
no code: the applied LSN, epoch and topic offsets live in the row of --id in
table logplayer_target_state, committed in the same SQL transaction as the
rows (target/sqlstore). It serves the Target service (the LogPlayer delivers
to it) on --addr.

One table per topic (the topic with characters outside [a-z0-9_] replaced by
"_", after --table-prefix), created when missing: --mode append keeps every
message (lsn, topic_offset, key, value, value_json, headers, applied_at);
--mode upsert applies the put/delete mutations of kv-schema topics to a
key/value table. An existing table of another shape is refused at startup.

A message that cannot go into its table is refused permanently (the
LogPlayer stops delivering to this target and shows the LSN in status
--player), or with --on-bad-message dead-letter is written with the reason
into logplayer_dead_letter in the same transaction. An unreachable database
at startup exits 1; lost while running, the target refuses deliveries until
it is back and the LogPlayer retries with backoff. Stops gracefully on
SIGINT or SIGTERM.`

func init() {
	register(&command{
		name:     "sink postgres",
		summary:  "run a target that feeds PostgreSQL tables exactly once",
		synopsis: "--id ID --addr HOST:PORT --dsn DSN --topics T,... [flags]",
		about:    sinkAbout,
		examples: []string{
			"logplayer sink postgres --id pg --addr 127.0.0.1:7450 --dsn postgres://app@127.0.0.1/app --topics orders,inventory",
			"logplayer sink postgres --id users --addr 127.0.0.1:7451 --dsn 'host=db user=app dbname=app' --topics users --mode upsert",
		},
		server:   true,
		required: []string{"id", "addr", "dsn", "topics"},
		new:      func() runner { return &sinkCmd{dialect: sqlstore.Postgres} },
	})
	register(&command{
		name:     "sink sqlite",
		summary:  "run a target that feeds SQLite tables exactly once",
		synopsis: "--id ID --addr HOST:PORT --path FILE --topics T,... [flags]",
		about:    sinkAbout,
		examples: []string{
			"logplayer sink sqlite --id lite --addr 127.0.0.1:7452 --path data/sink.db --topics orders",
		},
		server:   true,
		required: []string{"id", "addr", "path", "topics"},
		new:      func() runner { return &sinkCmd{dialect: sqlstore.SQLite} },
	})
}

type sinkCmd struct {
	targetFlags
	dialect           sqlstore.Dialect
	dsn, path         string
	prefix            string
	mode, onBad       choiceValue
	maxKey, maxValue  sizeValue
	skipLSNs          lsnList
	timeout, lockWait time.Duration
}

func (c *sinkCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "target `id` (the LogPlayer's name for this target; the key of its state row)")
	fs.Var(&c.addr, "addr", "gRPC `address` to serve (Target service)")
	if c.dialect == sqlstore.SQLite {
		fs.StringVar(&c.path, "path", "", "SQLite database `file` (created when missing)")
	} else {
		fs.StringVar(&c.dsn, "dsn", "", "PostgreSQL connection string (`DSN`: postgres://user@host:port/db or key=value)")
	}
	fs.Var(&c.topics, "topics", "`topics` to store, comma-separated: one table each")
	fs.StringVar(&c.prefix, "table-prefix", "", "`prefix` of every table name ([a-z0-9_])")
	c.mode = choiceValue{value: "append", choices: []string{"append", "upsert"}}
	fs.Var(&c.mode, "mode", "`append` (a row per message) or upsert (kv-schema mutations into a key/value table)")
	c.onBad = choiceValue{value: "refuse", choices: []string{"refuse", "dead-letter"}}
	fs.Var(&c.onBad, "on-bad-message", "`refuse` (permanent refusal at its LSN) or dead-letter (into logplayer_dead_letter, and go on)")
	fs.Var(&c.maxKey, "max-key-bytes", "longest key stored (`size`; default 2KiB in upsert mode, no bound in append mode)")
	fs.Var(&c.maxValue, "max-value-bytes", "longest value stored (`size`; default no bound below the database's)")
	fs.Var(&c.skipLSNs, "skip-lsn", "operator escape hatch after a permanent refusal: drop the data of these `LSNs` (comma-separated; see README)")
	fs.DurationVar(&c.timeout, "db-timeout", sqlstore.DefaultTimeout, "bound of one batch's SQL transaction; longer: the database is treated as lost")
	fs.DurationVar(&c.lockWait, "lock-timeout", sqlstore.DefaultLockTimeout, "how long to wait for the state row's lock held by another process")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	c.tls.register(fs)
}

// openSink opens the SQL store of the command's flags and reads its State.
func (c *sinkCmd) openSink(ctx context.Context, reg prometheus.Registerer) (*sqlstore.Store, target.State, error) {
	mc := sqlstore.MappingConfig{TargetID: types.TargetID(c.id), Topics: c.topics.items, TablePrefix: c.prefix,
		Mode: sqlstore.ModeNamed(c.mode.value), OnBadMessage: sqlstore.BadMessageNamed(c.onBad.value),
		MaxKeyBytes: int(c.maxKey.bytes), MaxValueBytes: int(c.maxValue.bytes)}
	store, st, err := sqlstore.OpenMappedState(ctx, mc, sqlstore.Config{TargetID: types.TargetID(c.id), Dialect: c.dialect, DSN: c.dsn, Path: c.path,
		Timeout: c.timeout, LockTimeout: c.lockWait, Registerer: reg})
	if err != nil && !errors.Is(err, sqlstore.ErrInvalidConfig) {
		err = fmt.Errorf("sink: %w", err)
	}
	return store, st, err
}

func (c *sinkCmd) run(ctx context.Context, s *sys) error {
	return c.serve(ctx, s, nil, func(reg prometheus.Registerer) (*serve.OpenTarget, error) { // no Shard reads to authorize
		store, st, err := c.openSink(ctx, reg)
		if err != nil {
			return nil, err
		}
		return serve.StoreTarget(target.Config{TargetID: types.TargetID(c.id), Store: store, Topics: c.topics.items, SkipLSNs: c.skipLSNs.lsns,
			Logger: s.log, Registerer: reg}, func() error { store.Close(); return nil },
			"sink serving", "db", c.dialect.String(), "topics", c.topics.items, "lsn", st.AppliedLSN, "epoch", st.Epoch)
	})
}
