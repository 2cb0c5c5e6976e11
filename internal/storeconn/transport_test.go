package storeconn

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// hangingStore takes NextEpoch and never answers it; got receives one
// value per call that reached it.
type hangingStore struct {
	logstorepb.UnimplementedLogStoreServer
	got chan struct{}
}

func (s *hangingStore) NextEpoch(ctx context.Context, _ *logstorepb.NextEpochRequest) (*logstorepb.NextEpochResponse, error) {
	s.got <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestTransportFailuresOverRealConnections: what apierr.AppliedOf says of
// failures that never reached a LogStore handler's answer, on real gRPC
// connections: a node refusing connections was sent nothing (Ready's
// ErrUnreachable: AppliedNo, retried as NotApplied); a call the server
// received whose deadline passed, or whose connection the server then
// closed, may have committed (AppliedMaybe).
func TestTransportFailuresOverRealConnections(t *testing.T) {
	dial := func(addr string) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Connection refused: the port was free and nothing listens on it.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := lis.Addr().String()
	lis.Close()
	err = Ready(ctx, dial(refused), 30*time.Second)
	if err == nil {
		t.Fatal("Ready on a closed port succeeded")
	}
	if got := apierr.AppliedOf(err); got != apierr.AppliedNo || apierr.Classify(err) != apierr.NotApplied {
		t.Fatalf("connection refused (%v): applied %v, class %v; want no, not applied", err, got, apierr.Classify(err))
	}

	// A server that receives the call and does not answer.
	lis, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	store := &hangingStore{got: make(chan struct{}, 2)}
	gs := grpc.NewServer()
	logstorepb.RegisterLogStoreServer(gs, store)
	go gs.Serve(lis)
	defer gs.Stop()
	ls := logstorepb.NewLogStoreClient(dial(lis.Addr().String()))

	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = ls.NextEpoch(short, &logstorepb.NextEpochRequest{})
	cancelShort()
	<-store.got // it was sent
	if got := apierr.AppliedOf(err); got != apierr.AppliedMaybe || apierr.Classify(err) != apierr.MaybeApplied {
		t.Fatalf("deadline after sending (%v): applied %v, class %v; want maybe", err, got, apierr.Classify(err))
	}

	errc := make(chan error, 1)
	go func() {
		_, err := ls.NextEpoch(ctx, &logstorepb.NextEpochRequest{})
		errc <- err
	}()
	<-store.got
	gs.Stop() // closes the connection under the call
	err = <-errc
	if got := apierr.AppliedOf(err); got != apierr.AppliedMaybe || apierr.Classify(err) != apierr.MaybeApplied {
		t.Fatalf("connection closed after sending (%v): applied %v, class %v; want maybe", err, got, apierr.Classify(err))
	}
}
