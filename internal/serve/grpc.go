package serve

import (
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/grpcedge"
)

// GRPC is one gRPC server serving on one listener.
type GRPC struct {
	name   string
	addr   string
	gs     *grpc.Server
	served chan struct{} // closed when Serve returned
}

// StartGRPC registers services on a new gRPC server built with opts and
// serves it on lis in a goroutine until Stop. name labels its log lines.
func StartGRPC(name string, lis net.Listener, register func(grpc.ServiceRegistrar), log *slog.Logger, opts ...grpc.ServerOption) *GRPC {
	g := &GRPC{name: name, addr: lis.Addr().String(), gs: grpc.NewServer(opts...), served: make(chan struct{})}
	register(g.gs)
	go func() {
		defer close(g.served)
		if err := g.gs.Serve(lis); err != nil {
			log.Error("grpc server stopped", "server", name, "err", err)
		}
	}()
	return g
}

// Addr is the server's bound address.
func (g *GRPC) Addr() string { return g.addr }

// Stop stops the server gracefully (running calls finish), forcing it after
// max, and waits for Serve to return. Nil-safe.
func (g *GRPC) Stop(max time.Duration) {
	if g == nil {
		return
	}
	grpcedge.StopGracefully(g.gs, max)
	<-g.served
}

// TargetStopMax bounds a target gRPC server's graceful stop.
const TargetStopMax = 5 * time.Second

// Target serves one target's gRPC services.
type Target struct {
	*GRPC
	ID    string
	close func() error // ends the target's streams and closes its store
}

// StartTarget serves a target's services (register) on lis; closeFn ends
// its delivery streams and closes its store at Stop. opts are the
// target's server options (target.ServerOptions, the LogPlayer's
// keepalive policy).
func StartTarget(id string, lis net.Listener, register func(grpc.ServiceRegistrar), closeFn func() error, log *slog.Logger, opts ...grpc.ServerOption) *Target {
	return &Target{GRPC: StartGRPC("target "+id, lis, register, log, opts...), ID: id, close: closeFn}
}

// Stop closes the target (its delivery streams end) and then stops the
// server gracefully, forcing it after TargetStopMax. It returns the
// close error.
func (t *Target) Stop() error {
	err := t.close()
	t.GRPC.Stop(TargetStopMax)
	return err
}
