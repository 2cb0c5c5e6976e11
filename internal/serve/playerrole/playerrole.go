// Package playerrole runs the `logplayer player` role: a LogPlayer, its
// admin API and its /metrics. It is apart from internal/serve, which the
// logplayer package's own tests use to start LogStore nodes, because it
// imports logplayer.
package playerrole

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logplayer"
)

// AdminStopMax bounds a LogPlayer admin server's graceful stop.
const AdminStopMax = 2 * time.Second

// Role is the `logplayer player` role: the LogPlayer, its admin API
// and its /metrics.
type Role struct {
	Player      logplayer.Config // its Registerer is Run's registry
	AdminAddr   string           // the PlayerAdmin API ("": none)
	MetricsAddr string           // "": no /metrics
	// Security gives the admin API's server options and /metrics' TLS
	// (nil: none); it is called once the LogPlayer is built, so that an
	// invalid Player is the error reported first.
	Security func() ([]grpc.ServerOption, *tls.Config, error)
	Log      *slog.Logger
}

// Run builds the LogPlayer of r with a process registry
// (serve.ProcessRegistry), serves its /metrics and admin API (logplayer.NewAdminServer)
// and runs it until ctx is done (Player.Run). An invalid r.Player is an
// error wrapping serve.ErrConfig.
func Run(ctx context.Context, r Role) error {
	reg := serve.ProcessRegistry()
	r.Player.Registerer = reg
	p, err := logplayer.New(r.Player)
	if errors.Is(err, logplayer.ErrInvalidConfig) {
		return serve.ConfigError(err)
	}
	if err != nil {
		return err
	}
	defer p.Close()
	var adminOpts []grpc.ServerOption
	var metricsTLS *tls.Config
	if r.Security != nil {
		if adminOpts, metricsTLS, err = r.Security(); err != nil {
			return err
		}
	}
	ms, err := serve.StartMetricsTLS(r.MetricsAddr, reg, r.Log, metricsTLS)
	if err != nil {
		return err
	}
	defer ms.Stop()
	if r.AdminAddr != "" {
		admin, err := serve.ListenAdmin(r.AdminAddr, logplayer.NewAdminServer(p).Register, r.Log, adminOpts...)
		if err != nil {
			return err
		}
		defer admin.Stop(AdminStopMax)
	}
	group := ""
	if r.Player.Group != nil {
		group = r.Player.Group.Name
	}
	r.Log.Info("logplayer starting", "targets", len(r.Player.Targets), "store", strings.Join(r.Player.LogStore, ","), "group", group)
	return p.Run(ctx)
}
