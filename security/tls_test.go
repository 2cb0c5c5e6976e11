package security

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// serveHealth starts a gRPC server with the health service on 127.0.0.1:0
// (TLS from srv unless srv is nil) and returns its address.
func serveHealth(t *testing.T, srv *ServerTLS, log *logs, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if srv != nil {
		opts = append(opts, grpc.Creds(GRPCServerCredentials(srv, log.logger())))
	}
	s := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// check dials addr with opts and calls Health.Check once.
func check(t *testing.T, addr string, opts ...grpc.DialOption) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func dialTLS(t *testing.T, o ClientOptions) grpc.DialOption {
	t.Helper()
	c, err := NewClientTLS(o)
	if err != nil {
		t.Fatal(err)
	}
	return grpc.WithTransportCredentials(GRPCClientCredentials(c))
}

func serverTLS(t *testing.T, o ServerOptions) *ServerTLS {
	t.Helper()
	s, err := NewServerTLS(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want an error containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error is not one line: %q", err)
	}
}

func TestMutualTLSRoundTrip(t *testing.T) {
	p := newPKI(t, "ca")
	srv := p.node("n1")
	var l logs
	addr := serveHealth(t, serverTLS(t, ServerOptions{Files: srv, ClientAuth: ClientAuthRequire}), &l)
	if err := check(t, addr, dialTLS(t, ClientOptions{Files: p.issue("admin", CertOptions{Client: true})})); err != nil {
		t.Fatalf("mTLS call: %v", err)
	}
	if err := check(t, "localhost"+addr[strings.LastIndex(addr, ":"):], dialTLS(t, ClientOptions{Files: p.issue("admin2", CertOptions{Client: true})})); err != nil {
		t.Fatalf("mTLS call by DNS name: %v", err)
	}
}

// Each misconfiguration the issue names is refused with one clear line on
// the client, and logged in one clear line by the server.
func TestRefusalsAreExplained(t *testing.T) {
	p := newPKI(t, "ca")
	other := newPKI(t, "other-ca")
	good := p.node("n1")
	expired := p.issue("expired", CertOptions{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-48 * time.Hour), Validity: time.Hour})
	future := p.issue("future", CertOptions{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(24 * time.Hour), Validity: time.Hour})
	strangerClient := other.issue("stranger", CertOptions{Client: true})

	for _, tc := range []struct {
		name       string
		server     *Files // nil: plaintext server
		clientAuth ClientAuth
		dial       []grpc.DialOption
		reason     error
		client     []string // the client's error contains each
		serverLog  string   // a server log line contains it ("" when the server cannot tell)
	}{
		{
			name: "plaintext client, TLS server", server: &good,
			dial:      []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
			client:    []string{"code = Unauthenticated", "this server requires TLS"},
			serverLog: "refused a plaintext (non-TLS) connection from 127.0.0.1:",
		},
		{
			name: "TLS client, plaintext server", server: nil,
			dial:   []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: p.caFile()}})},
			reason: ErrPlaintext, client: []string{"does not serve TLS"},
		},
		{
			name: "client trusts another CA", server: &good,
			dial:   []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: other.caFile()}})},
			reason: ErrUnknownCA, client: []string{"the certificate of server n1 at 127.0.0.1:", "is not signed by a trusted CA"},
			serverLog: "refused our certificate",
		},
		{
			name: "client certificate from another CA", server: &good, clientAuth: ClientAuthRequire,
			dial:   []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: p.caFile(), CertFile: strangerClient.CertFile, KeyFile: strangerClient.KeyFile}})},
			reason: ErrRefused, client: []string{"does not trust our certificate"},
			serverLog: "the certificate of client stranger at 127.0.0.1:",
		},
		{
			name: "server certificate expired", server: &expired,
			dial:   []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: p.caFile()}})},
			reason: ErrExpired, client: []string{"the certificate of server expired at", "expired at"},
			// Go's TLS client sends the same bad_certificate alert for every
			// refusal, so the server can only say that much.
			serverLog: "refused our certificate",
		},
		{
			name: "client certificate expired", server: &good, clientAuth: ClientAuthRequire,
			dial: []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: p.caFile(), CertFile: expired.CertFile, KeyFile: expired.KeyFile}})},
			// Go's server sends bad_certificate for an expired client
			// certificate in TLS 1.3; the server's own line says expired.
			reason: ErrRefused, client: []string{"refused our certificate"},
			serverLog: "the certificate of client expired at 127.0.0.1:",
		},
		{
			name: "server certificate not yet valid", server: &future,
			dial:   []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: p.caFile()}})},
			reason: ErrNotYetValid, client: []string{"the certificate of server future at", "is not valid before"},
			serverLog: "refused our certificate",
		},
		{
			name: "wrong server name", server: &good,
			dial:   []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: p.caFile()}, ServerName: "db.example"})},
			reason: ErrWrongName, client: []string{"is for [localhost 127.0.0.1 ::1], not db.example"},
			serverLog: "refused our certificate",
		},
		{
			name: "no client certificate, mutual TLS required", server: &good, clientAuth: ClientAuthRequire,
			dial:   []grpc.DialOption{dialTLS(t, ClientOptions{Files: Files{CAFile: p.caFile()}})},
			reason: ErrNoClientCert, client: []string{"requires a client certificate (mutual TLS)"},
			serverLog: "presented no client certificate; this server requires mutual TLS",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l logs
			var srv *ServerTLS
			if tc.server != nil {
				srv = serverTLS(t, ServerOptions{Files: *tc.server, ClientAuth: tc.clientAuth})
			}
			addr := serveHealth(t, srv, &l)
			err := check(t, addr, tc.dial...)
			wantErr(t, err, tc.client...)
			t.Logf("client: %v", err)
			if tc.reason != nil && !strings.Contains(err.Error(), "tls client: ") {
				t.Fatalf("client error %q is not a HandshakeError", err)
			}
			if tc.serverLog != "" {
				line := l.waitFor(t, tc.serverLog)
				t.Logf("server: %s", line)
				if strings.Contains(line, "\n") {
					t.Fatalf("server log is not one line: %q", line)
				}
			}
		})
	}
}

// Explain's reasons are typed: a dial through the same credentials outside
// gRPC shows the sentinel.
func TestHandshakeErrorReasons(t *testing.T) {
	p := newPKI(t, "ca")
	other := newPKI(t, "other-ca")
	var l logs
	addr := serveHealth(t, serverTLS(t, ServerOptions{Files: p.node("n1")}), &l)
	c, err := NewClientTLS(ClientOptions{Files: Files{CAFile: other.caFile()}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, _, err = GRPCClientCredentials(c).ClientHandshake(context.Background(), addr, raw)
	var he *HandshakeError
	if !errors.As(err, &he) || !errors.Is(err, ErrUnknownCA) || he.Local != "client" {
		t.Fatalf("handshake error %v (%T), want a client HandshakeError wrapping ErrUnknownCA", err, err)
	}
}

// Rotated files take effect on the next handshake, without a restart: the
// server's certificate, and the client's CA file.
func TestCertificatesReload(t *testing.T) {
	p := newPKI(t, "ca")
	p2 := newPKI(t, "ca-2")
	srvFiles := p.node("n1")
	var l logs
	srv := serverTLS(t, ServerOptions{Files: srvFiles, Reload: ReloadOptions{Interval: -1, Log: l.logger()}})
	addr := serveHealth(t, srv, &l)
	clientCA := Files{CAFile: p.dir + "/client-ca.crt"}
	copyFile(t, p.caFile(), clientCA.CAFile)
	dial := dialTLS(t, ClientOptions{Files: clientCA, Reload: ReloadOptions{Interval: -1}})
	if err := check(t, addr, dial); err != nil {
		t.Fatalf("before rotation: %v", err)
	}

	// The server rotates to a certificate of CA 2: the client, still
	// trusting CA 1 only, refuses it (so the server did reload).
	rotated := p2.node("n1")
	copyFile(t, rotated.CertFile, srvFiles.CertFile)
	copyFile(t, rotated.KeyFile, srvFiles.KeyFile)
	wantErr(t, check(t, addr, dial), "is not signed by a trusted CA")

	// The client's CA file now holds CA 2: it accepts (so it reloaded).
	copyFile(t, p2.caFile(), clientCA.CAFile)
	if err := check(t, addr, dial); err != nil {
		t.Fatalf("after the client's CA rotation: %v", err)
	}

	// A broken rewrite (a key of another certificate) keeps the previous
	// certificate and is logged.
	copyFile(t, p.node("other").KeyFile, srvFiles.KeyFile)
	if err := check(t, addr, dial); err != nil {
		t.Fatalf("after a broken rewrite: %v", err)
	}
	l.waitFor(t, "reloading failed; keeping the previous version")
}

// The reload check runs at most once per interval (by the injected clock).
func TestReloadInterval(t *testing.T) {
	p := newPKI(t, "ca")
	f := p.node("n1")
	now := time.Unix(1000, 0)
	r, err := NewReloader(f, ReloadOptions{Interval: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	first := r.Certificate()
	rotated := p.node("n1-next")
	copyFile(t, rotated.CertFile, f.CertFile)
	copyFile(t, rotated.KeyFile, f.KeyFile)
	if r.Certificate() != first {
		t.Fatal("reloaded before the interval passed")
	}
	now = now.Add(time.Minute)
	if r.Certificate() == first {
		t.Fatal("not reloaded after the interval")
	}
}

func TestConfigRefusals(t *testing.T) {
	p := newPKI(t, "ca")
	f := p.node("n1")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"server without cert", func() error { _, err := NewServerTLS(ServerOptions{Files: Files{CAFile: f.CAFile}}); return err }(), "needs a certificate"},
		{"mTLS without CA", func() error {
			_, err := NewServerTLS(ServerOptions{Files: Files{CertFile: f.CertFile, KeyFile: f.KeyFile}, ClientAuth: ClientAuthRequire})
			return err
		}(), "needs a CA file"},
		{"client without CA", func() error { _, err := NewClientTLS(ClientOptions{}); return err }(), "needs a CA file"},
		{"cert without key", func() error {
			_, err := NewClientTLS(ClientOptions{Files: Files{CAFile: f.CAFile, CertFile: f.CertFile}})
			return err
		}(), "go together"},
		{"missing file", func() error {
			_, err := NewClientTLS(ClientOptions{Files: Files{CAFile: f.CAFile + ".nope"}})
			return err
		}(), "no such file"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	var ca ClientAuth
	if err := ca.Set("require"); err != nil || ca != ClientAuthRequire || ca.String() != "require" {
		t.Fatalf("Set(require) = %v, %v", ca, err)
	}
	if err := ca.Set("always"); err == nil {
		t.Fatal("Set(always) accepted")
	}
}

// Neither side accepts TLS below 1.2.
func TestMinVersion(t *testing.T) {
	p := newPKI(t, "ca")
	s := serverTLS(t, ServerOptions{Files: p.node("n1")})
	c, err := NewClientTLS(ClientOptions{Files: Files{CAFile: p.caFile()}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Config().MinVersion != MinVersion || c.Config("x:1").MinVersion != MinVersion || MinVersion < 0x0303 {
		t.Fatal("MinVersion is not TLS 1.2 on both sides")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A later mtime than any earlier write, whatever the file system's
	// timestamp granularity.
	bump := time.Now().Add(time.Duration(len(b)) * time.Millisecond)
	if err := os.Chtimes(to, bump, bump); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkUnaryCall is one serial unary gRPC call on loopback, plaintext
// and over mutual TLS in the same run: the per-call cost of TLS once the
// connection is up.
func BenchmarkUnaryCall(b *testing.B) {
	dir := b.TempDir()
	if _, err := WriteBundle(BundleOptions{Dir: dir, Nodes: []NodeSpec{{Name: "n1"}}, Clients: []string{"c"}}); err != nil {
		b.Fatal(err)
	}
	in := func(n string) string { return dir + "/" + n }
	for _, mode := range []string{"plaintext", "mtls"} {
		b.Run("tls="+mode, func(b *testing.B) {
			var sopts []grpc.ServerOption
			dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			if mode == "mtls" {
				var err error
				sopts, err = GRPCServerOptions(ServerSettings{TLS: ServerOptions{
					Files: Files{CAFile: in("ca.crt"), CertFile: in("n1.crt"), KeyFile: in("n1.key")}, ClientAuth: ClientAuthRequire}})
				if err != nil {
					b.Fatal(err)
				}
				dial, err = GRPCDialOptions(ClientSettings{TLS: ClientOptions{Files: Files{CAFile: in("ca.crt"), CertFile: in("c.crt"), KeyFile: in("c.key")}}})
				if err != nil {
					b.Fatal(err)
				}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			s := grpc.NewServer(sopts...)
			healthpb.RegisterHealthServer(s, health.NewServer())
			go func() { _ = s.Serve(ln) }()
			defer s.Stop()
			cc, err := grpc.NewClient(ln.Addr().String(), dial...)
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			hc := healthpb.NewHealthClient(cc)
			ctx := context.Background()
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A client's Refusals keep the typed reason of a refused handshake, which
// the gRPC error carries only as text; the plaintext refusal of a TLS
// server carries an ErrorDetail like every refusal the server types.
func TestRefusalsRecorded(t *testing.T) {
	p := newPKI(t, "ca")
	good := p.node("n1")
	for _, tc := range []struct {
		name       string
		server     *Files
		clientAuth ClientAuth
		opts       ClientOptions
		reason     error
	}{
		{"wrong server name", &good, ClientAuthRequest, ClientOptions{Files: Files{CAFile: p.caFile()}, ServerName: "db.example"}, ErrWrongName},
		{"no client certificate", &good, ClientAuthRequire, ClientOptions{Files: Files{CAFile: p.caFile()}}, ErrNoClientCert},
		{"plaintext server", nil, ClientAuthNone, ClientOptions{Files: Files{CAFile: p.caFile()}}, ErrPlaintext},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l logs
			var srv *ServerTLS
			if tc.server != nil {
				srv = serverTLS(t, ServerOptions{Files: *tc.server, ClientAuth: tc.clientAuth})
			}
			tc.opts.Refusals = &Refusals{}
			if err := check(t, serveHealth(t, srv, &l), dialTLS(t, tc.opts)); err == nil {
				t.Fatal("call succeeded")
			}
			if he := tc.opts.Refusals.Last(); !errors.Is(he, tc.reason) {
				t.Fatalf("Refusals.Last() = %v, want reason %v", he, tc.reason)
			}
		})
	}
	var l logs
	err := check(t, serveHealth(t, serverTLS(t, ServerOptions{Files: good}), &l), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if status.Code(err) != codes.Unauthenticated || apierr.CodeOf(err) != logstorepb.ErrorCode_UNAUTHENTICATED {
		t.Fatalf("plaintext client of a TLS server: %v, want UNAUTHENTICATED with its ErrorDetail", err)
	}
}
