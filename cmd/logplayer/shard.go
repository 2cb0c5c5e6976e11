package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/types"
)

func init() {
	app.Register(&cli.Command{
		Name:     "shard",
		Server:   true,
		Required: []string{"id", "addr", "data-dir"},
		New:      func() cli.Runner { return &shardCmd{} },
	})
}

type shardCmd struct {
	id, dataDir string
	addr        cli.AddrValue
	metricsAddr cli.OptAddrValue
	topics      cli.StringList
	skipLSNs    lsnList
	adoptLog    bool
	tls         cli.TLSServerFlags
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
	opts, metricsTLS, err := c.tls.Setup(s.Log, topics)
	if err != nil {
		return err
	}
	reg := serve.ProcessRegistry()
	sh, err := shard.Open(shard.Config{
		Dir:              c.dataDir,
		ID:               types.TargetID(c.id),
		Topics:           c.topics.Items,
		SkipLSNs:         c.skipLSNs.lsns,
		AdoptLogIdentity: c.adoptLog,
		Logger:           s.Log,
		Registerer:       reg,
	})
	if errors.Is(err, shard.ErrInvalidConfig) {
		return cli.Usagef("%v", err)
	}
	if err != nil {
		return err
	}
	srv, ms, err := serve.ListenTarget(c.id, c.addr.Addr, c.metricsAddr.Addr, reg, metricsTLS, sh.Register, sh.Close, s.Log, targetServerOptions(opts)...)
	if err != nil {
		return err
	}
	defer ms.Stop()
	s.Log.Info("shard serving", "target", c.id, "addr", srv.Addr(), "dir", c.dataDir, "lsn", sh.AppliedLSN())
	<-ctx.Done()
	s.Log.Info("shutting down", "target", c.id)
	return srv.Stop()
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
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("want LSNs (>= 1) separated by commas")
		}
		v.lsns = append(v.lsns, types.LSN(n))
	}
	return nil
}
func (*lsnList) Repeatable() {}
