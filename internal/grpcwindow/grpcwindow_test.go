package grpcwindow

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
)

// pingCounter parses the HTTP/2 frames written on one direction of a
// connection and counts PING frames that are not ACKs (bandwidth probes).
type pingCounter struct {
	mu      sync.Mutex
	buf     []byte
	preface int // bytes of the client preface still to skip
	pings   int
}

func (p *pingCounter) feed(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.preface > 0 {
		n := min(p.preface, len(b))
		b, p.preface = b[n:], p.preface-n
	}
	p.buf = append(p.buf, b...)
	for len(p.buf) >= 9 {
		n := int(p.buf[0])<<16 | int(p.buf[1])<<8 | int(p.buf[2])
		if len(p.buf) < 9+n {
			return
		}
		if typ, flags := p.buf[3], p.buf[4]; typ == 0x6 && flags&0x1 == 0 {
			p.pings++
		}
		p.buf = p.buf[9+n:]
	}
}

func (p *pingCounter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pings
}

// countingConn counts what is written through it.
type countingConn struct {
	net.Conn
	out *pingCounter
}

func (c countingConn) Write(b []byte) (int, error) {
	c.out.feed(b)
	return c.Conn.Write(b)
}

type countingListener struct {
	net.Listener
	out *pingCounter
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.out}, nil
}

// slowEcho answers after a delay, as an Append answers after a Raft commit.
var slowEcho = grpc.ServiceDesc{
	ServiceName: "grpcwindow.test.Slow",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in emptypb.Empty
			if err := dec(&in); err != nil {
				return nil, err
			}
			time.Sleep(3 * time.Millisecond)
			return &emptypb.Empty{}, nil
		},
	}},
}

// probes makes calls back to back on one connection, each answered a
// few milliseconds later, and returns the bandwidth-probe PINGs the server
// and the client sent.
func probes(t *testing.T, sopts []grpc.ServerOption, dopts []grpc.DialOption) (server, client int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fromServer, fromClient := &pingCounter{}, &pingCounter{preface: 24}
	srv := grpc.NewServer(sopts...)
	srv.RegisterService(&slowEcho, struct{}{})
	go srv.Serve(countingListener{lis, fromServer})
	defer srv.Stop()
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, fromClient}, nil
	}
	cc, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial)}, dopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cc.Invoke(ctx, "/grpcwindow.test.Slow/Echo", &emptypb.Empty{}, new(emptypb.Empty))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	return fromServer.count(), fromClient.count()
}

// TestFixedWindowsSendNoProbes: with grpc-go's default windows a lone call
// answered later costs bandwidth-probe PINGs (the test's control: it must
// see some, or it could not see the fix); with ServerOptions and
// DialOptions neither side sends any.
func TestFixedWindowsSendNoProbes(t *testing.T) {
	s, c := probes(t, nil, nil)
	t.Logf("default windows: %d probe PINGs from the server, %d from the client over 30 calls", s, c)
	if s+c == 0 {
		t.Fatal("default windows sent no probe PING: the counter cannot tell the fix from no fix")
	}
	s, c = probes(t, ServerOptions(), DialOptions())
	if s != 0 || c != 0 {
		t.Errorf("fixed windows: %d probe PINGs from the server, %d from the client, want none", s, c)
	}
}
