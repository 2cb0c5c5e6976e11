package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logplayer"
)

func init() {
	register(&command{
		name:     "player",
		summary:  "run a LogPlayer: deliver the log to targets, exactly once and in order",
		synopsis: "--store LIST [--group NAME] [--target ID=ADDR/TOPIC,... ...] [--targets-file FILE] [flags]",
		about: `
Runs the LogPlayer: it takes a new epoch from the LogStore (so targets fence
any older LogPlayer), handshakes with every target, reads the committed log
and delivers each transaction's slices to the targets subscribed to their
topics, over one gRPC stream per target. A target that fails or returns is
caught up from the LogStore; idle targets get progress markers.

Targets come from --target flags and/or --targets-file (JSON:
{"targets": [{"id": "shard-0", "address": "127.0.0.1:7430", "topics": ["shard-0"]}]}).

With --group NAME the LogPlayer is a member of a LogPlayer group instead:
it renews a lease through the LogStore and delivers to the targets the
LogStore assigns it, each with its own fencing token; when a member dies its
targets move to the others within about two leases. --target and
--targets-file then register those targets in the LogStore's target registry
(an admin call) before joining; every member sees every registered target.
The member stops delivering when its lease is not renewed in time
(--lease-margin) and leaves the group on SIGINT/SIGTERM.

Stops gracefully on SIGINT or SIGTERM.`,
		examples: []string{
			"logplayer player --store 127.0.0.1:7400,127.0.0.1:7401,127.0.0.1:7402 \\",
			"    --target shard-0=127.0.0.1:7430/shard-0 --target search=127.0.0.1:7500/orders,inventory",
			"logplayer player --config player.json --metrics-addr 127.0.0.1:9420",
			"logplayer player --store 127.0.0.1:7400 --group players --id player-1 --admin-addr 127.0.0.1:7421",
		},
		server:   true,
		required: []string{"store"},
		new:      func() runner { return &playerCmd{} },
	})
}

type playerCmd struct {
	id               string
	store            addrList
	targets          targetSpecs
	targetsFile      string
	adminAddr        optAddrValue
	metricsAddr      optAddrValue
	progressInterval time.Duration
	reportInterval   time.Duration
	handshakeTimeout time.Duration
	maxBatchCount    int
	windowBatches    int
	group            string
	leaseMargin      float64
	heartbeat        time.Duration

	tls  tlsServerFlags // the admin API's, and the files the LogPlayer dials with
	dial tlsClientFlags
}

func (c *playerCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "id", "", "this LogPlayer's `name` in Hellos and logs (default: host/pid)")
	fs.Var(&c.store, "store", "LogStore API `addresses`, comma-separated")
	fs.Var(&c.targets, "target", "a target `ID=ADDR/TOPIC[,TOPIC...]`; repeatable")
	fs.StringVar(&c.targetsFile, "targets-file", "", "JSON `file` of targets (added to --target)")
	c.adminAddr.addr = "127.0.0.1:7420"
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
	c.tls.register(fs)
	c.dial.register(fs, false)
}

func (c *playerCmd) config(s *sys) (logplayer.Config, error) {
	cfg := logplayer.Config{
		PlayerID:         c.id,
		LogStore:         c.store.items,
		Targets:          c.targets.targets,
		ProgressInterval: c.progressInterval,
		ReportInterval:   c.reportInterval,
		HandshakeTimeout: c.handshakeTimeout,
		MaxBatchCount:    c.maxBatchCount,
		WindowBatches:    c.windowBatches,
		Logger:           s.log,
	}
	// The LogPlayer's connections' security (to the LogStore and the
	// targets): TLS verified by --tls-ca, --tls-cert as its client
	// certificate (its identity, which needs the player role), --token-file.
	d := c.dial
	d.ca, d.cert, d.key = c.tls.ca, c.tls.cert, c.tls.key
	var err error
	if cfg.DialOptions, err = d.dialOptions(); err != nil {
		return cfg, err
	}
	if c.targetsFile != "" {
		more, err := logplayer.LoadTargets(c.targetsFile)
		if err != nil {
			return cfg, usagef("%v", err)
		}
		cfg.Targets = append(cfg.Targets, more...)
	}
	if c.group != "" {
		cfg.Group = &logplayer.GroupConfig{
			Name: c.group, AdminAddress: c.adminAddr.addr, LeaseMargin: c.leaseMargin, HeartbeatInterval: c.heartbeat,
		}
	}
	return cfg, nil
}

func (c *playerCmd) run(ctx context.Context, s *sys) error {
	cfg, err := c.config(s)
	if err != nil {
		return err
	}
	err = serve.RunPlayer(ctx, serve.PlayerRole{Player: cfg, AdminAddr: c.adminAddr.addr, MetricsAddr: c.metricsAddr.addr, Log: s.log,
		Security: func() ([]grpc.ServerOption, *tls.Config, error) { return c.tls.setup(s.log, nil) }})
	if errors.Is(err, serve.ErrConfig) {
		return usagef("%v", err)
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
func (*targetSpecs) repeatable() {}
