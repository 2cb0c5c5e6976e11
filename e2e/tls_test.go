package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/security"
)

// The system under test runs mutual TLS on every connection (client API,
// Raft, LogPlayer to stores and targets, admin API, shard reads) with a
// policy: each process gets its node certificate, the test its own
// (testIdentity) with every grant it needs. /metrics stays plain HTTP.
const (
	testIdentity = "e2e"
	policyFile   = "policy.json"
)

// e2eTLS is the material of one system, in dir (mounted at root in a
// container).
type e2eTLS struct {
	dir  string // on the host
	root string // as the processes see it
	// tokens: the servers also take bearer tokens (--auth-tokens) and ask
	// for client certificates instead of requiring them, as `logplayer
	// dev` runs by default; the test connects with its token
	// (testIdentity.token) over TLS, without a client certificate.
	tokens bool
}

// writeTLS issues a CA, a node certificate per component (valid for
// hosts too: the Docker aliases) and the test's client certificate.
func writeTLS(t testing.TB, dir, root string, hosts []string) *e2eTLS {
	t.Helper()
	return writeSecurity(t, dir, root, hosts, false)
}

// writeTLSTokens is writeTLS with a bearer token for testIdentity too, and
// the servers configured as the dev cluster's (e2eTLS.tokens).
func writeTLSTokens(t testing.TB, dir string, hosts []string) *e2eTLS {
	t.Helper()
	return writeSecurity(t, dir, dir, hosts, true)
}

func writeSecurity(t testing.TB, dir, root string, hosts []string, tokens bool) *e2eTLS {
	t.Helper()
	var toks []string
	if tokens {
		toks = []string{testIdentity}
	}
	nodes := []security.NodeSpec{{Name: "player", Hosts: hosts}}
	for i := range storeNodes {
		nodes = append(nodes, security.NodeSpec{Name: fmt.Sprintf("n%d", i+1), Hosts: hosts})
	}
	for i := range shardCount {
		nodes = append(nodes, security.NodeSpec{Name: demo.ShardTopic(i), Hosts: hosts})
	}
	nodes = append(nodes, security.NodeSpec{Name: eventsTarget, Hosts: hosts})
	if _, err := security.WriteBundle(security.BundleOptions{Dir: dir, Nodes: nodes, Clients: []string{testIdentity}, Tokens: toks}); err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"grants": [
  {"identity": "player", "role": "player"},
  {"identity": %[1]q, "role": "producer", "topics": ["*"]},
  {"identity": %[1]q, "role": "consumer", "topics": ["*"], "groups": ["*"]},
  {"identity": %[1]q, "role": "admin"}
]}`, testIdentity)
	if err := os.WriteFile(filepath.Join(dir, policyFile), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return &e2eTLS{dir: dir, root: root, tokens: tokens}
}

// args are the security flags of component name (its certificate).
func (s *e2eTLS) args(name string) []string {
	p := func(f string) string { return filepath.Join(s.root, f) }
	args := []string{"--tls-cert", p(name + ".crt"), "--tls-key", p(name + ".key"), "--tls-ca", p(security.CACertFile),
		"--auth-policy", p(policyFile)}
	if s.tokens {
		return append(args, "--tls-client-auth", "request", "--auth-tokens", p(security.TokensFile))
	}
	return append(args, "--tls-client-auth", "require")
}

// dialOptions connect as testIdentity.
func (s *e2eTLS) dialOptions(t testing.TB) []grpc.DialOption {
	t.Helper()
	if s.tokens {
		opts, err := security.GRPCDialOptions(security.ClientSettings{
			TLS:       security.ClientOptions{Files: security.Files{CAFile: filepath.Join(s.dir, security.CACertFile)}},
			TokenFile: filepath.Join(s.dir, testIdentity+".token"),
		})
		if err != nil {
			t.Fatal(err)
		}
		return opts
	}
	opts, err := security.GRPCDialOptions(security.ClientSettings{TLS: security.ClientOptions{Files: security.Files{
		CAFile:   filepath.Join(s.dir, security.CACertFile),
		CertFile: filepath.Join(s.dir, testIdentity+".crt"),
		KeyFile:  filepath.Join(s.dir, testIdentity+".key"),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// addGrant adds a grant of role to identity in the policy in dir (before
// the servers start: they read it once).
func addGrant(t testing.TB, dir, identity, role string) {
	t.Helper()
	path := filepath.Join(dir, policyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Grants []map[string]any `json:"grants"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	p.Grants = append(p.Grants, map[string]any{"identity": identity, "role": role})
	if b, err = json.Marshal(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
