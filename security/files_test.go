package security

import (
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParsePolicyRefusals(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"grants": [{"identity": "a", "role": "root"}]}`, `unknown role "root"`},
		{`{"grants": [{"identity": "", "role": "admin"}]}`, "no identity"},
		{`{"grants": [{"identity": "a", "role": "producer"}]}`, "needs topics"},
		{`{"grants": [{"identity": "a", "role": "producer", "topics": ["x"], "groups": ["g"]}]}`, "takes no groups"},
		{`{"grants": [{"identity": "a", "role": "consumer"}]}`, "needs topics or groups"},
		{`{"grants": [{"identity": "a", "role": "admin", "topics": ["x"]}]}`, "takes no topics"},
		{`{"grants": [{"identity": "a", "role": "consumer", "topics": ["[x"]}]}`, "bad pattern"},
		{`{"grants": [{"identity": "a", "role": "player", "topic": ["x"]}]}`, "unknown field"},
		{`{"grants": [`, "policy:"},
		{`{"grants": [{"identity": "a", "role": "player", "producers": ["x"]}]}`, "takes no producer names"},
		{`{"grants": [{"identity": "a", "role": "producer", "topics": ["x"], "producers": ["a*b"]}]}`, "bad producer name"},
		{`{"grants": [{"identity": "a", "role": "producer", "topics": ["x"], "producers": [""]}]}`, "bad producer name"},
	} {
		if _, err := ParsePolicy([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePolicy(%s) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func TestPolicyGrantsAddUp(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"grants": [
		{"identity": "app", "role": "producer", "topics": ["orders-*"]},
		{"identity": "app", "role": "consumer", "groups": ["app-*"]},
		{"identity": "*", "role": "consumer", "topics": ["public"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	g := p.grantsFor("app")
	if !g.canProduce("orders-eu") || g.canProduce("orders") || !g.canGroup("app-1") || !g.canRead("public") || g.canRead("orders-eu") || g.has(RoleAdmin) {
		t.Fatalf("app's grants: %+v", g)
	}
	if other := p.grantsFor("someone"); !other.canRead("public") || other.has(RoleProducer) {
		t.Fatalf("'*' grant: %+v", other)
	}
}

// Producer names: a grant's own names and prefixes; a grant without names
// takes every name no grant binds; '*' and '/' are plain characters of a
// name, not glob syntax.
func TestProducerNames(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"grants": [
		{"identity": "a", "role": "producer", "topics": ["x"], "producers": ["a-*", "shared"]},
		{"identity": "b", "role": "consumer", "groups": ["g"], "producers": ["b/*"]},
		{"identity": "old", "role": "producer", "topics": ["x"]},
		{"identity": "ops", "role": "admin"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		identity, name string
		want           bool
	}{
		{"a", "a-1", true}, {"a", "a-", true}, {"a", "shared", true}, {"a", "shared-2", false}, {"a", "b/1", false}, {"a", "free", false},
		{"b", "b/x/y", true}, {"b", "a-1", false},
		{"old", "free", true}, {"old", "a-1", false}, {"old", "shared", false}, {"old", "b/1", false},
		{"ops", "free", false}, {"nobody", "free", false},
	} {
		if got := p.grantsFor(tc.identity).names.allows(tc.name); got != tc.want {
			t.Errorf("%s may use producer name %q: %v, want %v", tc.identity, tc.name, got, tc.want)
		}
	}
	if p.grantsFor("old").names.every() || p.grantsFor("a").names.every() {
		t.Error("every(): true while names are bound")
	}
	if w := p.Warnings(); len(w) != 1 || !strings.Contains(w[0], `"old"`) {
		t.Errorf("Warnings() = %q, want one about grant \"old\"", w)
	}
	unbound, _ := ParsePolicy([]byte(`{"grants": [{"identity": "old", "role": "producer", "topics": ["x"]}]}`))
	star, _ := ParsePolicy([]byte(`{"grants": [{"identity": "dev", "role": "producer", "topics": ["x"], "producers": ["*"]}]}`))
	if !unbound.grantsFor("old").names.every() || !star.grantsFor("dev").names.every() || !star.grantsFor("dev").names.allows("any/name*") {
		t.Error("every(): false for a policy that binds no names, or for a '*' grant")
	}
}

func TestTokens(t *testing.T) {
	tok, line, err := NewToken("producer-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(line), tok) {
		t.Fatal("the token file line contains the token itself")
	}
	tokens, err := ParseTokens([]byte("# comment\n\n" + string(line) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := tokens.Lookup(tok)
	if err != nil || id.Name != "producer-1" || id.Source != SourceToken {
		t.Fatalf("Lookup = %v, %v", id, err)
	}
	if _, err := tokens.Lookup(tok + "x"); !errors.Is(err, ErrBadToken) {
		t.Fatalf("Lookup of a wrong token = %v", err)
	}
	for _, bad := range []string{`{"identity": "a"}`, `{"identity": "a", "sha256": "zz"}`, `{"identity": "", "sha256": "` + strings.Repeat("0", 64) + `"}`, `{"identity": "a", "sha256": "` + strings.Repeat("0", 64) + `", "roles": []}`} {
		if _, err := ParseTokens([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseTokens(%s) = %v, want a line-1 error", bad, err)
		}
	}
}

// Token and policy files reload on change; a broken edit keeps the old.
func TestTokenAndPolicyFilesReload(t *testing.T) {
	dir := t.TempDir()
	tokPath, polPath := filepath.Join(dir, "tokens.jsonl"), filepath.Join(dir, "policy.json")
	tok1, line1, _ := NewToken("a")
	tok2, line2, _ := NewToken("b")
	write := func(path, s string) {
		t.Helper()
		if err := writeAtomic(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		bump := time.Now().Add(time.Hour)
		if err := os.Chtimes(path, bump, bump); err != nil {
			t.Fatal(err)
		}
	}
	write(tokPath, string(line1)+"\n")
	write(polPath, `{"grants": [{"identity": "a", "role": "admin"}]}`)
	var l logs
	opts := ReloadOptions{Interval: -1, Log: l.logger()}
	tf, err := LoadTokenFile(tokPath, opts)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := LoadPolicyFile(polPath, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Tokens().Lookup(tok2); err == nil {
		t.Fatal("token b known before it was added")
	}
	write(tokPath, string(line1)+"\n"+string(line2)+"\n")
	write(polPath, `{"grants": [{"identity": "b", "role": "admin"}]}`)
	if id, err := tf.Tokens().Lookup(tok2); err != nil || id.Name != "b" {
		t.Fatalf("after reload, token b: %v, %v", id, err)
	}
	if !pf.Policy().grantsFor("b").admin || pf.Policy().grantsFor("a").admin {
		t.Fatal("policy not reloaded")
	}
	write(polPath, `{"grants": [{"identity": "b", "role": "superuser"}]}`)
	if !pf.Policy().grantsFor("b").admin {
		t.Fatal("a broken policy edit replaced the policy")
	}
	l.waitFor(t, "reloading failed; keeping the previous version")
	if _, err := tf.Tokens().Lookup(tok1); err != nil {
		t.Fatalf("token a lost: %v", err)
	}
	if _, err := LoadPolicyFile(filepath.Join(dir, "missing.json"), opts); err == nil {
		t.Fatal("a missing policy file was accepted")
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	ok, bad := filepath.Join(dir, "ok"), filepath.Join(dir, "bad")
	_ = os.WriteFile(ok, []byte("  abc\n"), 0o600)
	_ = os.WriteFile(bad, []byte("a b\n"), 0o600)
	if tok, err := ReadTokenFile(ok); err != nil || tok != "abc" {
		t.Fatalf("ReadTokenFile = %q, %v", tok, err)
	}
	if _, err := ReadTokenFile(bad); err == nil {
		t.Fatal("two words accepted as a token")
	}
}

func TestIdentityFromCertificate(t *testing.T) {
	u, _ := url.Parse("spiffe://cluster/producer-1")
	for _, tc := range []struct {
		c    *x509.Certificate
		want string
	}{
		{&x509.Certificate{URIs: []*url.URL{u}, DNSNames: []string{"d"}}, "spiffe://cluster/producer-1"},
		{&x509.Certificate{DNSNames: []string{"d"}}, "d"},
		{&x509.Certificate{}, ""},
	} {
		tc.c.Subject.CommonName = ""
		if id, ok := IdentityFromCertificate(tc.c); id.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("IdentityFromCertificate = %v, %v; want %q", id, ok, tc.want)
		}
	}
	c := &x509.Certificate{DNSNames: []string{"d"}}
	c.Subject.CommonName = "cn"
	if id, _ := IdentityFromCertificate(c); id.Name != "cn" {
		t.Errorf("CN before DNS SAN: got %q", id.Name)
	}
}

func TestWriteBundle(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteBundle(BundleOptions{Dir: dir, Nodes: []NodeSpec{{Name: "n1", Hosts: []string{"db1.example", "10.0.0.1"}}}, Clients: []string{"admin"}, Validity: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Fatalf("wrote %v", files)
	}
	ca, err := LoadKeyPair(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil || !ca.Cert.IsCA {
		t.Fatalf("CA: %v", err)
	}
	n1, err := LoadKeyPair(filepath.Join(dir, "n1.crt"), filepath.Join(dir, "n1.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "db1.example", "10.0.0.1"} {
		if _, err := n1.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("n1 for %s: %v", host, err)
		}
	}
	if _, err := n1.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("n1 as a client (Raft dial): %v", err)
	}
	if d := n1.Cert.NotAfter.Sub(n1.Cert.NotBefore); d != 48*time.Hour {
		t.Errorf("validity %v, want 48h", d)
	}
	admin, err := LoadKeyPair(filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate is valid as a server certificate")
	}
	if id, _ := IdentityFromCertificate(admin.Cert); id.Name != "admin" {
		t.Errorf("admin identity %q", id.Name)
	}
	if fi, err := os.Stat(filepath.Join(dir, "admin.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, %v", fi.Mode(), err)
	}

	// A second run reuses the CA: the new certificate verifies with it.
	files, err = WriteBundle(BundleOptions{Dir: dir, Clients: []string{"producer-1"}})
	if err != nil || len(files) != 2 {
		t.Fatalf("second run wrote %v, %v", files, err)
	}
	p1, err := LoadKeyPair(filepath.Join(dir, "producer-1.crt"), filepath.Join(dir, "producer-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p1.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("second run's certificate not from the same CA: %v", err)
	}

	// Tokens: NAME.token holds the token, tokens.jsonl accumulates hashes.
	files, err = WriteBundle(BundleOptions{Dir: dir, Tokens: []string{"admin", "player"}})
	if err != nil || len(files) != 3 {
		t.Fatalf("tokens wrote %v, %v", files, err)
	}
	if _, err := WriteBundle(BundleOptions{Dir: dir, Tokens: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	tf, err := LoadTokenFile(filepath.Join(dir, TokensFile), ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tf.Tokens().entries) != 3 {
		t.Fatalf("tokens.jsonl has %d entries, want 3", len(tf.Tokens().entries))
	}
	tok, err := ReadTokenFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := tf.Tokens().Lookup(tok); err != nil || id.Name != "admin" {
		t.Fatalf("admin.token: %v, %v", id, err)
	}

	for _, tc := range []struct {
		o    BundleOptions
		want string
	}{
		{BundleOptions{Dir: dir}, "nothing to issue"},
		{BundleOptions{Dir: dir, Clients: []string{"a/b"}}, "want 1-64 characters"},
		{BundleOptions{Dir: dir, Clients: []string{"ca"}}, "reserved"},
		{BundleOptions{Dir: dir, Clients: []string{"x"}, Nodes: []NodeSpec{{Name: "x"}}}, "used twice"},
		{BundleOptions{Clients: []string{"x"}}, "no directory"},
	} {
		if _, err := WriteBundle(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WriteBundle(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}
}
