package main

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/security"
)

// Security flags that cannot work are refused before anything starts, with
// a line naming the flag to add.
func TestSecurityFlagsRefusedWithoutTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := security.WriteBundle(security.BundleOptions{Dir: dir, Nodes: []security.NodeSpec{{Name: "n1"}}}); err != nil {
		t.Fatal(err)
	}
	store := []string{"store", "--id", "n1", "--data-dir", filepath.Join(dir, "data"), "--raft-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(store, "--auth-policy", "p.json"), "need --tls-cert"},
		{append(store, "--metrics-tls"), "need --tls-cert"},
		{append(store, "--tls-cert", filepath.Join(dir, "n1.crt"), "--tls-key", filepath.Join(dir, "n1.key"), "--tls-client-auth", "require"), "needs a CA file"},
		{append(store, "--tls-cert", filepath.Join(dir, "n1.crt"), "--tls-key", filepath.Join(dir, "n1.key"), "--tls-ca", filepath.Join(dir, "ca.crt")), "--raft-peers"},
		{[]string{"shard", "--id", "s", "--addr", "127.0.0.1:0", "--data-dir", dir, "--auth-tokens", "t.jsonl"}, "need --tls-cert"},
		{[]string{"append", "--token-file", "x.token", "--topic", "a=1"}, "need --tls-ca"},
		{[]string{"status", "--tls-ca", filepath.Join(dir, "missing.crt")}, "missing.crt"},
		{[]string{"player", "--store", "127.0.0.1:1", "--token-file", "x.token"}, "need --tls-ca"},
	} {
		code, _, errOut := runCLI(t, nil, tc.args...)
		wantUsage(t, code, errOut, tc.want)
	}
}

// tlsStore serves one LogStore node over TLS (clientAuth) with the node
// certificate of the bundle in dir, or in plaintext when tls is false, and
// returns its API address.
func tlsStore(t *testing.T, dir string, tls bool, clientAuth security.ClientAuth) string {
	t.Helper()
	var opts []grpc.ServerOption
	if tls {
		var err error
		opts, err = security.GRPCServerOptions(security.ServerSettings{
			TLS: security.ServerOptions{ClientAuth: clientAuth, Files: security.Files{
				CAFile: filepath.Join(dir, security.CACertFile), CertFile: filepath.Join(dir, "n1.crt"), KeyFile: filepath.Join(dir, "n1.key")}},
			Log: logstoretest.QuietLogger(),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return logstoretest.Start(t, 1, nil, opts...).Nodes[0].APIAddr()
}

// A TLS mistake is reported as what it is, in the first words, with the
// flag that fixes it, never as an unreachable cluster: a wrong
// --tls-server-name, a CA that did not sign the server's certificate, no
// client certificate for a server that requires one, a plaintext client
// of a TLS server, and a TLS client of a plaintext server.
func TestTLSMistakesNamedFirst(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		if _, err := security.WriteBundle(security.BundleOptions{Dir: d, Nodes: []security.NodeSpec{{Name: "n1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	tlsAddr := tlsStore(t, dir, true, security.ClientAuthRequest)
	mtlsAddr := tlsStore(t, dir, true, security.ClientAuthRequire)
	plainAddr := tlsStore(t, dir, false, security.ClientAuthNone)
	ca, otherCA := filepath.Join(dir, security.CACertFile), filepath.Join(other, security.CACertFile)
	for _, tc := range []struct {
		name  string
		args  []string
		first string // the line's first words after "logplayer CMD: "
		flag  string
	}{
		{"wrong server name", []string{"status", "--addr", tlsAddr, "--tls-ca", ca, "--tls-server-name", "wrong.example"}, "wrong TLS server name", "--tls-server-name"},
		{"wrong server name, append", []string{"append", "--addr", tlsAddr, "--tls-ca", ca, "--tls-server-name", "wrong.example", "--topic", "a=1"}, "wrong TLS server name", "--tls-server-name"},
		{"unknown CA", []string{"status", "--addr", tlsAddr, "--tls-ca", otherCA}, "unknown CA", "--tls-ca"},
		{"no client certificate", []string{"status", "--addr", mtlsAddr, "--tls-ca", ca}, "no client certificate", "--tls-cert"},
		{"plaintext client, TLS server", []string{"status", "--addr", tlsAddr}, "TLS required", "--tls-ca"},
		{"plaintext client, TLS server, append", []string{"append", "--addr", tlsAddr, "--topic", "a=1"}, "TLS required", "--tls-ca"},
		{"TLS client, plaintext server", []string{"status", "--addr", plainAddr, "--tls-ca", ca}, "not a TLS server", "--tls-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, nil, append(tc.args, "--timeout", "5s")...)
			wantRuntimeError(t, code, errOut, tc.flag)
			t.Log(errOut)
			if prefix := "logplayer " + tc.args[0] + ": " + tc.first; !strings.HasPrefix(errOut, prefix) {
				t.Fatalf("stderr %q: want it to start with %q", errOut, prefix)
			}
		})
	}
}
