package main

import (
	"path/filepath"
	"testing"

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
