package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/serve/playerrole"
	"github.com/logplayer/logplayer/logplayer"
)

type playerCmd struct {
	id               string
	store            cli.AddrList
	targets          targetSpecs
	targetsFile      string
	adminAddr        cli.OptAddrValue
	metricsAddr      cli.OptAddrValue
	progressInterval time.Duration
	reportInterval   time.Duration
	handshakeTimeout time.Duration
	maxBatchCount    int
	windowBatches    int
	group            string
	leaseMargin      float64
	heartbeat        time.Duration

	tls  cli.TLSServerFlags // the admin API's, and the files the LogPlayer dials with
	dial cli.TLSClientFlags
}

func (c *playerCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "this LogPlayer's `name` in Hellos and logs (default: host/pid)")
	fs.Var(&c.store, "store", "LogStore API `addresses`, comma-separated")
	fs.Var(&c.targets, "target", "a target `ID=ADDR/TOPIC[,TOPIC...]`; repeatable")
	fs.StringVar(&c.targetsFile, "targets-file", "", "JSON `file` of targets (added to --target)")
	c.adminAddr.Addr = "127.0.0.1:7420"
	fs.Var(&c.adminAddr, "admin-addr", "serve the PlayerAdmin gRPC API (add/remove/list targets) on this `address` (off when empty)")
	fs.Var(&c.metricsAddr, "metrics-addr", "serve Prometheus /metrics on this `address` (off when empty)")
	fs.DurationVar(&c.progressInterval, "progress-interval", logplayer.DefaultProgressInterval, "how often an idle target gets a progress marker")
	fs.DurationVar(&c.reportInterval, "report-interval", logplayer.DefaultReportInterval, "how often targets' acked LSNs go to the LogStore (retention floor)")
	fs.DurationVar(&c.handshakeTimeout, "handshake-timeout", logplayer.DefaultHandshakeTimeout, "how long a start waits for the targets' handshakes")
	fs.IntVar(&c.maxBatchCount, "max-batch", logplayer.DefaultMaxBatchCount, "deliveries in one batch sent to a target at most")
	fs.IntVar(&c.windowBatches, "window", logplayer.DefaultWindowBatches, "batches in flight (sent, not acked) per target at most")
	fs.StringVar(&c.group, "group", "", "join the LogPlayer group `NAME`: deliver to the targets the LogStore assigns (--target registers targets)")
	fs.Float64Var(&c.leaseMargin, "lease-margin", logplayer.DefaultLeaseMargin, "group member: fraction of the lease given up to clock drift (stop delivering at send time + lease × (1 − margin))")
	fs.DurationVar(&c.heartbeat, "heartbeat-interval", 0, "group member: heartbeat period (0: a third of the LogStore's lease)")
	c.tls.Register(fs)
	c.dial.Register(fs, false)
}

func (c *playerCmd) config(s *cli.Sys) (logplayer.Config, error) {
	cfg := logplayer.Config{
		PlayerID:         c.id,
		LogStore:         c.store.Items,
		Targets:          c.targets.targets,
		ProgressInterval: c.progressInterval,
		ReportInterval:   c.reportInterval,
		HandshakeTimeout: c.handshakeTimeout,
		MaxBatchCount:    c.maxBatchCount,
		WindowBatches:    c.windowBatches,
		Logger:           s.Log,
	}
	// The LogPlayer's connections' security (to the LogStore and the
	// targets): TLS verified by --tls-ca, --tls-cert as its client
	// certificate (its identity, which needs the player role), --token-file.
	d := c.dial
	d.CA, d.Cert, d.Key = c.tls.CA, c.tls.Cert, c.tls.Key
	var err error
	if cfg.DialOptions, err = d.DialOptions(); err != nil {
		return cfg, err
	}
	if c.targetsFile != "" {
		more, err := logplayer.LoadTargets(c.targetsFile)
		if err != nil {
			return cfg, cli.Usagef("%v", err)
		}
		cfg.Targets = append(cfg.Targets, more...)
	}
	if c.group != "" {
		cfg.Group = &logplayer.GroupConfig{
			Name: c.group, AdminAddress: c.adminAddr.Addr, LeaseMargin: c.leaseMargin, HeartbeatInterval: c.heartbeat,
		}
	}
	return cfg, nil
}

func (c *playerCmd) Run(ctx context.Context, s *cli.Sys) error {
	cfg, err := c.config(s)
	if err != nil {
		return err
	}
	err = playerrole.Run(ctx, playerrole.Role{Player: cfg, AdminAddr: c.adminAddr.Addr, MetricsAddr: c.metricsAddr.Addr, Log: s.Log,
		Security: func() ([]grpc.ServerOption, *tls.Config, error) { return c.tls.Setup(s.Log, nil) }})
	if errors.Is(err, serve.ErrConfig) {
		return cli.Usagef("%v", err)
	}
	return err
}

// targetSpecs is the repeatable --target ID=ADDR/TOPIC[,TOPIC...].
type targetSpecs struct{ targets []logplayer.TargetConfig }

func (v *targetSpecs) String() string {
	var parts []string
	for _, t := range v.targets {
		parts = append(parts, t.ID+"="+t.Address+"/"+strings.Join(t.Topics, ","))
	}
	return strings.Join(parts, " ")
}

func (v *targetSpecs) Set(s string) error {
	tc, err := logplayer.ParseTargetSpec(s)
	if err != nil {
		return err
	}
	if err := logplayer.ValidateTargets(append(v.targets, tc)); err != nil {
		return err
	}
	v.targets = append(v.targets, tc)
	return nil
}
func (*targetSpecs) Repeatable() {}
