package main

import (
	"context"
	"errors"
	"flag"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/types"
)

type shardCmd struct {
	targetFlags
	dataDir  string
	skipLSNs lsnList
	adoptLog bool
}

// targetFlags are the flags of every target role (shard, events, sink).
type targetFlags struct {
	id          string
	addr        cli.AddrValue
	metricsAddr cli.OptAddrValue
	topics      cli.StringList
	tls         cli.TLSServerFlags
}

// serve runs the target open opens (serve.RunTarget) on the flags'
// addresses and security; shardTopics are the topics whose Shard reads
// are authorized (nil: none). An invalid configuration is a usage error.
func (f *targetFlags) serve(ctx context.Context, s *cli.Sys, shardTopics []string, open func(prometheus.Registerer) (*serve.OpenTarget, error)) error {
	opts, metricsTLS, err := f.tls.Setup(s.Log, shardTopics)
	if err != nil {
		return err
	}
	err = serve.RunTarget(ctx, serve.TargetRole{ID: f.id, Addr: f.addr.Addr, MetricsAddr: f.metricsAddr.Addr,
		MetricsTLS: metricsTLS, Options: targetServerOptions(opts), Log: s.Log}, open)
	if errors.Is(err, shard.ErrInvalidConfig) || errors.Is(err, target.ErrInvalidConfig) || errors.Is(err, sqlstore.ErrInvalidConfig) {
		return cli.Usagef("%v", err)
	}
	return err
}

func (c *shardCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "target `id` (the LogPlayer's name for this shard)")
	fs.Var(&c.addr, "addr", "gRPC `address` to serve (Target and Shard services)")
	fs.StringVar(&c.dataDir, "data-dir", "", "`directory` of the shard's bbolt file")
	fs.Var(&c.topics, "topics", "`topics` this shard owns, comma-separated (default: its id)")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	fs.Var(&c.skipLSNs, "skip-lsn", "operator escape hatch after a permanent refusal: drop the data of these `LSNs` (comma-separated; see README)")
	fs.BoolVar(&c.adoptLog, "adopt-log-identity", false, "operator reset after an OTHER_LOG refusal (the LogStore was restored or recovered): take the log's new identity, keeping this shard's data (see README)")
	c.tls.Register(fs)
}

func (c *shardCmd) Run(ctx context.Context, s *cli.Sys) error {
	topics := c.topics.Items
	if len(topics) == 0 {
		topics = []string{c.id} // shard.Config's default
	}
	return c.serve(ctx, s, topics, func(reg prometheus.Registerer) (*serve.OpenTarget, error) {
		sh, err := shard.Open(shard.Config{Dir: c.dataDir, ID: types.TargetID(c.id), Topics: c.topics.Items,
			SkipLSNs: c.skipLSNs.lsns, AdoptLogIdentity: c.adoptLog, Logger: s.Log, Registerer: reg})
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
func (*lsnList) Repeatable() {}
