package security

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// What `logplayer certs` writes, plus a policy, is all a server and its
// clients need: GRPCServerOptions and GRPCDialOptions from file names.
func TestSettingsFromBundle(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteBundle(BundleOptions{Dir: dir, Nodes: []NodeSpec{{Name: "n1"}}, Clients: []string{"admin"}, Tokens: []string{"producer-1"}}); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(matrixPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	srvOpts, err := GRPCServerOptions(ServerSettings{
		TLS:        ServerOptions{Files: Files{CAFile: in("ca.crt"), CertFile: in("n1.crt"), KeyFile: in("n1.key")}, ClientAuth: ClientAuthRequest},
		PolicyFile: policy, TokensFile: in(TokensFile),
	})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(srvOpts...)
	c := &calls{n: map[string]int{}}
	gs.RegisterService(stubService(logstorepb.File_logstore_proto.Services().ByName("LogStore"), c), struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()

	dial := func(s ClientSettings) logstorepb.LogStoreClient {
		opts, err := GRPCDialOptions(s)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(ln.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return logstorepb.NewLogStoreClient(cc)
	}
	producer := dial(ClientSettings{TLS: ClientOptions{Files: Files{CAFile: in("ca.crt")}}, TokenFile: in("producer-1.token")})
	admin := dial(ClientSettings{TLS: ClientOptions{Files: Files{CAFile: in("ca.crt"), CertFile: in("admin.crt"), KeyFile: in("admin.key")}}})
	ctx := context.Background()
	req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders"}}}
	if _, err := producer.Append(ctx, req); err != nil {
		t.Fatalf("producer-1 (token) Append: %v", err)
	}
	if _, err := admin.Append(ctx, req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("admin (certificate) Append: %v, want PERMISSION_DENIED", err)
	}
	if _, err := admin.DeleteGroup(ctx, &logstorepb.DeleteGroupRequest{Group: "g"}); err != nil {
		t.Fatalf("admin DeleteGroup: %v", err)
	}

	_, err = GRPCServerOptions(ServerSettings{TLS: ServerOptions{Files: Files{CertFile: in("n1.crt"), KeyFile: in("n1.key")}}, TokensFile: in(TokensFile)})
	if err == nil || !strings.Contains(err.Error(), "needs a policy file") {
		t.Fatalf("tokens without policy: %v", err)
	}
	if _, err := GRPCDialOptions(ClientSettings{TLS: ClientOptions{Files: Files{CAFile: in("ca.crt")}}, TokenFile: in("nope.token")}); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}
