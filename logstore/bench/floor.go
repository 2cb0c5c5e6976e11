package bench

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/logplayer/logplayer/internal/grpcwindow"
	"github.com/logplayer/logplayer/logstore"
)

// floorServer is the GRPCConns system's server: one gRPC server on
// 127.0.0.1 with a single unary method that takes the transaction's bytes
// and answers nothing, no LogStore behind it. Its row is the floor of a
// one-connection-per-client call on this machine: what any design that
// sends one unary call per transaction pays before it stores anything.
// Its gRPC server is configured as a LogStore node's is (floorOptions), so
// the floor differs from the LogStore's call only in what the handler
// does.
type floorServer struct {
	srv  *grpc.Server
	addr string
}

const floorMethod = "/logplayer.bench.Floor/Echo"

var floorDesc = grpc.ServiceDesc{
	ServiceName: "logplayer.bench.Floor",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in wrapperspb.BytesValue
			if err := dec(&in); err != nil {
				return nil, err
			}
			return &emptypb.Empty{}, nil
		},
	}},
}

func startFloor(opts []grpc.ServerOption) (*floorServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: floor listen: %w", err)
	}
	srv := grpc.NewServer(append(floorOptions(), opts...)...)
	srv.RegisterService(&floorDesc, struct{}{})
	go srv.Serve(lis)
	return &floorServer{srv: srv, addr: lis.Addr().String()}, nil
}

// floorOptions are a default LogStore node's gRPC server options
// (logstore.ServerOptions): the edge's codec and interceptors, the
// flow-control windows, the receive limit and the stream workers. The
// workers matter most: without them every call runs on a new goroutine
// whose stack grows, 12-15% of the floor server's CPU (docs/BENCHMARKS.md,
// "One connection per client: where the server CPU goes").
func floorOptions() []grpc.ServerOption { return logstore.ServerOptions(0) }

func (f *floorServer) close() { f.srv.Stop() }

// dialFloor opens one client connection to the floor server at addr and
// returns the op that calls it with payload, and the connection's close.
func dialFloor(addr string, payload []byte, sec *Security) (op, func(), error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if sec != nil {
		opts = sec.DialOptions
	}
	opts = append(opts, grpcwindow.DialOptions()...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: floor dial: %w", err)
	}
	req := wrapperspb.Bytes(payload)
	return func(ctx context.Context) error {
		return cc.Invoke(ctx, floorMethod, req, new(emptypb.Empty))
	}, func() { cc.Close() }, nil
}
