package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/security"
)

// `logplayer certs` writes a CA, the named certificates and tokens, and
// prints the files.
func TestCertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	code, out, errOut := runCLI(t, nil, "certs", "--dir", dir, "--node", "n1=db1.example,10.0.0.1", "--client", "admin", "--token", "player", "--validity", "720h")
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("certs: exit %d, stderr %q", code, errOut)
	}
	for _, f := range []string{"ca.crt", "ca.key", "n1.crt", "n1.key", "admin.crt", "admin.key", "player.token", "tokens.jsonl"} {
		if !strings.Contains(out, filepath.Join(dir, f)+"\n") {
			t.Errorf("output does not list %s:\n%s", f, out)
		}
	}
	n1, err := security.LoadKeyPair(filepath.Join(dir, "n1.crt"), filepath.Join(dir, "n1.key"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(n1.Cert.DNSNames, ",") != "localhost,db1.example" || len(n1.Cert.IPAddresses) != 3 {
		t.Fatalf("n1 SANs %v %v", n1.Cert.DNSNames, n1.Cert.IPAddresses)
	}
	code, _, errOut = runCLI(t, nil, "certs", "--dir", dir)
	if code != cli.ExitRuntime || !strings.Contains(errOut, "nothing to issue") {
		t.Fatalf("certs with nothing to issue: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, nil, "certs", "--client", "x")
	wantUsage(t, code, errOut, "missing required flag --dir")
}
