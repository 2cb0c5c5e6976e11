package serve

import (
	"context"
	"crypto/tls"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/target"
)

// TargetRole is where a target process serves (`logplayer shard`, `sink`,
// `events`): its id, gRPC and /metrics addresses, and security.
type TargetRole struct {
	ID, Addr    string
	MetricsAddr string      // "": no /metrics
	MetricsTLS  *tls.Config // nil: /metrics over plain HTTP
	// Options follow target.ServerOptions: the LogPlayer's keepalive
	// policy (logplayer.ServerKeepalive) and the target's security.
	Options []grpc.ServerOption
	Log     *slog.Logger
}

// OpenTarget is a target a role has opened, ready to be served.
type OpenTarget struct {
	Register func(grpc.ServiceRegistrar)
	// Close ends the target's streams and closes its store.
	Close func() error
	// Serving is the message logged once it serves, with "target" and
	// "addr" and then Attrs.
	Serving string
	Attrs   []any
}

// StoreTarget is the OpenTarget of a target.Store a role has just opened
// (target.NewServerFor: on an error closeStore is called).
func StoreTarget(cfg target.Config, closeStore func() error, serving string, attrs ...any) (*OpenTarget, error) {
	srv, closeAll, err := target.NewServerFor(cfg, closeStore)
	if err != nil {
		return nil, err
	}
	return &OpenTarget{Register: srv.Register, Close: closeAll, Serving: serving, Attrs: attrs}, nil
}

// RunTarget is a target role's life: open the target with a process
// registry (ProcessRegistry) for its metrics, serve it (ListenTarget)
// until ctx is done, then stop it (Target.Stop) and return the close
// error. An error of open is returned as it is.
func RunTarget(ctx context.Context, r TargetRole, open func(reg prometheus.Registerer) (*OpenTarget, error)) error {
	reg := ProcessRegistry()
	t, err := open(reg)
	if err != nil {
		return err
	}
	ts, ms, err := ListenTarget(r.ID, r.Addr, r.MetricsAddr, reg, r.MetricsTLS, t.Register, t.Close, r.Log, r.Options...)
	if err != nil {
		return err
	}
	defer ms.Stop()
	r.Log.Info(t.Serving, append([]any{"target", r.ID, "addr", ts.Addr()}, t.Attrs...)...)
	<-ctx.Done()
	r.Log.Info("shutting down", "target", r.ID)
	return ts.Stop()
}
