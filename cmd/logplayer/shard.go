package main

import (
	"context"
	"errors"
	"flag"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/types"
)

func init() {
	register(&command{
		name:     "shard",
		summary:  "run a reference key-value shard target (bbolt)",
		synopsis: "--id ID --addr HOST:PORT --data-dir DIR [--topics T,...] [flags]",
		about: `
Runs the reference storage-shard target: a key-value store on bbolt that
applies the shardpb.Mutation messages of its topics and stores its applied LSN
in the same bbolt transaction. It serves the Target service (the LogPlayer
delivers to it) and the Shard read service (Get, Scan, WaitApplied) on --addr.

By default shard "shard-3" owns topic "shard-3". Stops gracefully on SIGINT or
SIGTERM.

A message that is not a valid mutation is refused permanently: the LogPlayer
stops delivering to this shard and shows the LSN (status --player). Fix the
producer, then either deploy a shard that understands it or restart this one
with --skip-lsn LSN to drop that transaction's data for this shard.`,
		examples: []string{
			"logplayer shard --id shard-0 --addr 127.0.0.1:7430 --data-dir data/shard-0",
			"logplayer shard --id users --topics users-a,users-b --addr 127.0.0.1:7431 --data-dir data/users --metrics-addr 127.0.0.1:9431",
			"logplayer shard --id shard-0 --addr 127.0.0.1:7430 --data-dir data/shard-0 --skip-lsn 4711   # after a refusal at LSN 4711",
		},
		server:   true,
		required: []string{"id", "addr", "data-dir"},
		new:      func() runner { return &shardCmd{} },
	})
}

type shardCmd struct {
	targetFlags
	dataDir  string
	skipLSNs lsnList
	adoptLog bool
}

// targetFlags are the flags of every target role (shard, events, sink).
type targetFlags struct {
	id          string
	addr        addrValue
	metricsAddr optAddrValue
	topics      stringList
	tls         tlsServerFlags
}

// serve runs the target open opens (serve.RunTarget) on the flags'
// addresses and security; shardTopics are the topics whose Shard reads
// are authorized (nil: none). An invalid configuration is a usage error.
func (f *targetFlags) serve(ctx context.Context, s *sys, shardTopics []string, open func(prometheus.Registerer) (*serve.OpenTarget, error)) error {
	opts, metricsTLS, err := f.tls.setup(s.log, shardTopics)
	if err != nil {
		return err
	}
	err = serve.RunTarget(ctx, serve.TargetRole{ID: f.id, Addr: f.addr.addr, MetricsAddr: f.metricsAddr.addr,
		MetricsTLS: metricsTLS, Options: targetServerOptions(opts), Log: s.log}, open)
	if errors.Is(err, shard.ErrInvalidConfig) || errors.Is(err, target.ErrInvalidConfig) || errors.Is(err, sqlstore.ErrInvalidConfig) {
		return usagef("%v", err)
	}
	return err
}

func (c *shardCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "target `id` (the LogPlayer's name for this shard)")
	fs.Var(&c.addr, "addr", "gRPC `address` to serve (Target and Shard services)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` of the shard's bbolt file")
	fs.Var(&c.topics, "topics", "`topics` this shard owns, comma-separated (default: its id)")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	fs.Var(&c.skipLSNs, "skip-lsn", "operator escape hatch after a permanent refusal: drop the data of these `LSNs` (comma-separated; see README)")
	fs.BoolVar(&c.adoptLog, "adopt-log-identity", false, "operator reset after an OTHER_LOG refusal (the LogStore was restored or recovered): take the log's new identity, keeping this shard's data (see README)")
	c.tls.register(fs)
}

func (c *shardCmd) run(ctx context.Context, s *sys) error {
	topics := c.topics.items
	if len(topics) == 0 {
		topics = []string{c.id} // shard.Config's default
	}
	return c.serve(ctx, s, topics, func(reg prometheus.Registerer) (*serve.OpenTarget, error) {
		sh, err := shard.Open(shard.Config{Dir: c.dataDir, ID: types.TargetID(c.id), Topics: c.topics.items,
			SkipLSNs: c.skipLSNs.lsns, AdoptLogIdentity: c.adoptLog, Logger: s.log, Registerer: reg})
		if err != nil {
			return nil, err
		}
		return &serve.OpenTarget{Register: sh.Register, Close: sh.Close, Serving: "shard serving",
			Attrs: []any{"dir", c.dataDir, "lsn", sh.AppliedLSN()}}, nil
	})
}

// lsnList is a comma-separated list of LSNs (>= 1); repeated flags add up.
type lsnList struct{ lsns []types.LSN }

func (v *lsnList) String() string {
	parts := make([]string, len(v.lsns))
	for i, l := range v.lsns {
		parts[i] = strconv.FormatUint(uint64(l), 10)
	}
	return strings.Join(parts, ",")
}

func (v *lsnList) Set(s string) error {
	lsns, err := types.ParseLSNs(s)
	v.lsns = append(v.lsns, lsns...)
	return err
}
func (*lsnList) repeatable() {}
