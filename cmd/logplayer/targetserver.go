package main

import (
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/target"
)

// targetStopMax bounds a target gRPC server's graceful stop.
const targetStopMax = 5 * time.Second

// targetServer serves one target's gRPC services. Its server allows the
// LogPlayer's keepalive pings (logplayer.ServerKeepalive).
type targetServer struct {
	id     string
	addr   string
	gs     *grpc.Server
	served chan struct{} // closed when Serve returned
	close  func() error  // ends the target's streams and closes its store
	log    *slog.Logger
}

// serveTarget registers the target's services and serves them on lis in a
// goroutine until stop.
func serveTarget(id string, lis net.Listener, register func(grpc.ServiceRegistrar), closeFn func() error, log *slog.Logger) *targetServer {
	t := &targetServer{
		id: id, addr: lis.Addr().String(), log: log, close: closeFn, served: make(chan struct{}),
		gs: grpc.NewServer(append(target.ServerOptions(), allowPlayerPings())...),
	}
	register(t.gs)
	go func() {
		defer close(t.served)
		if err := t.gs.Serve(lis); err != nil {
			log.Error("target server stopped", "target", id, "err", err)
		}
	}()
	return t
}

// stop closes the target (its delivery streams end) and then stops the
// server gracefully, forcing it after targetStopMax.
func (t *targetServer) stop() error {
	err := t.close()
	stopGracefully(t.gs, targetStopMax)
	<-t.served
	return err
}

// stopGracefully stops gs gracefully, forcing it after max.
func stopGracefully(gs *grpc.Server, max time.Duration) {
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(max):
		gs.Stop()
		<-done
	}
}

// allowPlayerPings lets a gRPC server accept the LogPlayer's keepalive pings
// (gRPC's default policy answers pings more frequent than 5 minutes with
// GOAWAY too_many_pings). Every server a LogPlayer connects to uses it: the
// targets and the LogStore nodes.
func allowPlayerPings() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive)
}
