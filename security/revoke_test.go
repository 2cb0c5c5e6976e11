package security

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
)

// followServer serves LogStore.Read and Target.Deliver as the real
// handlers do while a stream is open: Read answers once and then waits
// for more of the log until its context ends (a follow); Deliver answers
// every message on the stream, receiving on its own goroutine, until its
// context ends.
func followServer(gs *grpc.Server) {
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "logplayer.logstore.v1.LogStore", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Read", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			if err := ss.RecvMsg(&logstorepb.ReadRequest{}); err != nil {
				return err
			}
			if err := ss.SendMsg(readAnswer()); err != nil {
				return err
			}
			<-ss.Context().Done()
			return status.FromContextError(ss.Context().Err()).Err()
		}}},
	}, struct{}{})
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "logplayer.target.v1.Target", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "Deliver", ServerStreams: true, ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			got := make(chan error, 1)
			go func() {
				for {
					if err := ss.RecvMsg(&targetpb.DeliverRequest{}); err != nil {
						got <- err
						return
					}
					got <- nil
				}
			}()
			for {
				select {
				case err := <-got:
					if err != nil {
						return err
					}
					if err := ss.SendMsg(&targetpb.DeliverResponse{}); err != nil {
						return err
					}
				case <-ss.Context().Done():
					return status.FromContextError(ss.Context().Err()).Err()
				}
			}
		}}},
	}, struct{}{})
}

// revokeFixture is a TLS server with the real interceptors over files a
// test edits: tokens of "reader" (consumer of orders) and "player", and a
// certificate of "consumer-1".
type revokeFixture struct {
	p                     *pki
	authz                 *Authorizer
	addr                  string
	policyPath, tokenPath string
	tokens                map[string]string // identity → token
	lines                 map[string][]byte // identity → token file line
}

const revokePolicy = `{"grants": [
  {"identity": "reader", "role": "consumer", "topics": ["orders"]},
  {"identity": "consumer-1", "role": "consumer", "topics": ["orders"]},
  {"identity": "player", "role": "player"}
]}`

func newRevokeFixture(t *testing.T) *revokeFixture {
	t.Helper()
	f := &revokeFixture{p: newPKI(t, "ca"), tokens: map[string]string{}, lines: map[string][]byte{}}
	f.policyPath, f.tokenPath = filepath.Join(f.p.dir, "policy.json"), filepath.Join(f.p.dir, "tokens.jsonl")
	for _, id := range []string{"reader", "player"} {
		tok, line, err := NewToken(id)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[id], f.lines[id] = tok, line
	}
	f.writeTokens(t, "reader", "player")
	f.writePolicy(t, revokePolicy)
	var log logs
	reload := ReloadOptions{Interval: 50 * time.Millisecond, Log: log.logger()}
	policy, err := LoadPolicyFile(f.policyPath, reload)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokenFile(f.tokenPath, reload)
	if err != nil {
		t.Fatal(err)
	}
	authz, err := NewAuthorizer(Config{Policy: policy, Tokens: tokens, Log: log.logger(), RecheckInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := serverTLS(t, ServerOptions{Files: f.p.node("n1"), ClientAuth: ClientAuthRequest})
	gs := grpc.NewServer(append(authz.ServerOptions(), grpc.Creds(GRPCServerCredentials(srvTLS, log.logger())))...)
	followServer(gs)
	f.authz = authz
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	f.addr = ln.Addr().String()
	return f
}

// writeFile replaces path and moves its mtime forward, so the next check
// sees a change even within the file system's timestamp granularity.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := writeAtomic(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
}

func (f *revokeFixture) writeTokens(t *testing.T, identities ...string) {
	var data []byte
	for _, id := range identities {
		data = append(append(data, f.lines[id]...), '\n')
	}
	writeFile(t, f.tokenPath, append([]byte("# tokens\n"), data...))
}

func (f *revokeFixture) writePolicy(t *testing.T, policy string) {
	writeFile(t, f.policyPath, []byte(policy))
}

func (f *revokeFixture) conn(t *testing.T, identity string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: f.p.caFile()}})}
	if tok, ok := f.tokens[identity]; ok {
		opts = append(opts, grpc.WithPerRPCCredentials(BearerToken(tok)))
	} else {
		opts = []grpc.DialOption{dialTLS(t, ClientOptions{Files: f.p.issue(identity, CertOptions{Client: true})})}
	}
	cc, err := grpc.NewClient(f.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// recvEnd receives on a stream until it fails, on its own goroutine, and
// hands the error over.
func recvEnd(recv func() error) <-chan error {
	end := make(chan error, 1)
	go func() {
		for {
			if err := recv(); err != nil {
				end <- err
				return
			}
		}
	}()
	return end
}

// waitEnd waits (with a generous deadline: the recheck runs every 50 ms)
// for a stream to end with code and the same ErrorDetail code.
func waitEnd(t *testing.T, what string, end <-chan error, code codes.Code, ec logstorepb.ErrorCode) {
	t.Helper()
	select {
	case err := <-end:
		if status.Code(err) != code || apierr.CodeOf(err) != ec {
			t.Fatalf("%s ended with %v, want %v with ErrorDetail %v", what, err, code, ec)
		}
		if !strings.Contains(status.Convert(err).Message(), "while the stream was open") {
			t.Fatalf("%s: %q does not say the grant went while the stream was open", what, status.Convert(err).Message())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still open 30 s after its identity lost the grant", what)
	}
}

// Revoking an identity ends its open streams: a token removed from the
// token file ends a follow Read and a Deliver stream with UNAUTHENTICATED,
// a grant removed from the policy ends a certificate identity's Read with
// PERMISSION_DENIED; a stream whose identity keeps its grant stays open.
func TestRevocationEndsOpenStreams(t *testing.T) {
	f := newRevokeFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	openRead := func(identity string) <-chan error {
		rs, err := logstorepb.NewLogStoreClient(f.conn(t, identity)).Read(ctx, &logstorepb.ReadRequest{FromLsn: 1, Topics: []string{"orders"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Recv(); err != nil {
			t.Fatalf("%s's Read before the revocation: %v", identity, err)
		}
		return recvEnd(func() error { _, err := rs.Recv(); return err })
	}
	readerEnd, certEnd := openRead("reader"), openRead("consumer-1")
	ds, err := targetpb.NewTargetClient(f.conn(t, "player")).Deliver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deliverOnce := func() error {
		if err := ds.Send(&targetpb.DeliverRequest{}); err != nil {
			return err
		}
		_, err := ds.Recv()
		return err
	}
	if err := deliverOnce(); err != nil {
		t.Fatalf("Deliver before the revocation: %v", err)
	}

	f.writeTokens(t, "player") // the reader's token is revoked
	waitEnd(t, "the reader's Read", readerEnd, codes.Unauthenticated, logstorepb.ErrorCode_UNAUTHENTICATED)
	if err := deliverOnce(); err != nil {
		t.Fatalf("the player's Deliver after another identity's revocation: %v", err)
	}

	f.writePolicy(t, strings.Replace(revokePolicy, `{"identity": "consumer-1", "role": "consumer", "topics": ["orders"]},`, "", 1))
	waitEnd(t, "consumer-1's Read", certEnd, codes.PermissionDenied, logstorepb.ErrorCode_PERMISSION_DENIED)

	f.writeTokens(t)
	waitEnd(t, "the player's Deliver", recvEnd(func() error { _, err := ds.Recv(); return err }), codes.Unauthenticated, logstorepb.ErrorCode_UNAUTHENTICATED)
	testwait.For(t, testwait.Max, "no open stream left to re-check", func() bool { return f.authz.OpenStreams() == 0 })
}
