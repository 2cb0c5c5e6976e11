package grpcedge

import (
	"time"

	"google.golang.org/grpc"
)

// StopGracefully stops gs gracefully (running calls finish), forcing it
// after max. Every server of the module stops this way.
func StopGracefully(gs *grpc.Server, max time.Duration) {
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		gs.Stop()
		<-done
	}
}
