package target_test

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

var ctxT = targettest.Context

// wantRefusal checks err is a status with code c and ErrorDetail code ec.
func wantRefusal(t *testing.T, err error, c codes.Code, ec logstorepb.ErrorCode) *logstorepb.ErrorDetail {
	t.Helper()
	if status.Code(err) != c {
		t.Fatalf("got %v, want gRPC code %v", err, c)
	}
	d := target.Detail(err)
	if d == nil || d.Code != ec {
		t.Fatalf("got detail %v (err %v), want %v", d, err, ec)
	}
	return d
}

type env struct {
	t     *testing.T
	store *targettest.MemStore
	srv   *target.Server
	cc    *grpc.ClientConn
}

func newEnv(t *testing.T, store *targettest.MemStore, mod func(*target.Config)) *env {
	cfg := target.Config{TargetID: "t1", Store: store}
	if mod != nil {
		mod(&cfg)
	}
	srv, addr := targettest.Serve(t, cfg)
	return &env{t: t, store: store, srv: srv, cc: targettest.Dial(t, addr)}
}

func (e *env) open(epoch types.Epoch, session types.Session) (*targettest.Sender, *targetpb.HelloAck) {
	e.t.Helper()
	s, ack, err := targettest.Open(ctxT(e.t), e.cc, targettest.Hello("t1", epoch, session))
	if err != nil {
		e.t.Fatalf("open epoch %d session %d: %v", epoch, session, err)
	}
	e.t.Cleanup(s.Close)
	return s, ack
}

func appliedLSNs(m *targettest.MemStore) []uint64 {
	var out []uint64
	for _, d := range m.Applied() {
		out = append(out, d.Lsn)
	}
	return out
}

func val(s string) [][]byte { return [][]byte{[]byte(s)} }

// refuseBad is a Store check: the first delivery carrying a message "bad" is
// refused permanently, as a payload the target can never apply.
func refuseBad(ds []*targetpb.Delivery) error {
	for _, d := range ds {
		for _, sl := range d.Slices {
			for _, m := range sl.Messages {
				if string(m.Value) == "bad" {
					return target.Permanent(types.LSN(d.Lsn), errors.New("not a mutation"))
				}
			}
		}
	}
	return nil
}
