package serve_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/grpcedge/edgetest"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/playerpb"
)

// TestAdminMalformed: the admin server answers bytes that are not a valid
// request with INVALID_ARGUMENT and an ErrorDetail; the handler never runs.
func TestAdminMalformed(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := serve.StartAdmin(lis, func(r grpc.ServiceRegistrar) {
		playerpb.RegisterPlayerAdminServer(r, playerpb.UnimplementedPlayerAdminServer{})
	}, logstoretest.QuietLogger())
	defer a.Stop(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	edgetest.WantInvalid(t, "AddTarget", edgetest.Unary(ctx, edgetest.Conn(t, a.Addr()), playerpb.PlayerAdmin_AddTarget_FullMethodName, edgetest.Garbage))
}
