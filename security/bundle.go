package security

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Bundle file names inside BundleOptions.Dir.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
	TokensFile = "tokens.jsonl"
)

// NodeSpec is a node certificate to issue: the node's name (its identity,
// and the file name) and the host names or IPs it is reached at, beyond
// localhost, 127.0.0.1 and ::1, which every node certificate carries.
type NodeSpec struct {
	Name  string
	Hosts []string
}

// ParseNodeSpec reads NAME[=HOST,...] (`logplayer certs --node`).
func ParseNodeSpec(s string) NodeSpec {
	name, hosts, _ := strings.Cut(s, "=")
	n := NodeSpec{Name: name}
	if hosts != "" {
		n.Hosts = strings.Split(hosts, ",")
	}
	return n
}

// BundleOptions is what `logplayer certs` makes.
type BundleOptions struct {
	Dir string
	// Nodes get server and client certificates (a node serves its API and
	// dials its Raft peers); Clients get client certificates named after
	// the identity they carry (producer-1, player, admin, …).
	Nodes   []NodeSpec
	Clients []string
	// Tokens get a bearer token each: NAME.token (mode 0600, the token for
	// the client) and a line appended to tokens.jsonl (its hash, for the
	// servers' token file).
	Tokens []string
	// CAValidity, Validity: zero means DefaultCAValidity, DefaultCertValidity.
	CAValidity time.Duration
	Validity   time.Duration
}

// namePattern is what a node or client name may be: it becomes a file name
// and an identity.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// WriteBundle writes a CA (or reuses Dir/ca.crt and Dir/ca.key when both
// exist) and one NAME.crt / NAME.key per node and client, replacing earlier
// files of the same names (a running node reloads them). It returns the
// files it wrote, in order.
func WriteBundle(opts BundleOptions) ([]string, error) {
	if opts.Dir == "" {
		return nil, errors.New("certs: no directory")
	}
	if len(opts.Nodes) == 0 && len(opts.Clients) == 0 && len(opts.Tokens) == 0 {
		return nil, errors.New("certs: nothing to issue (name a node, a client or a token)")
	}
	seen := map[string]bool{"ca": true} // ca.crt, ca.key
	check := func(name string) error {
		if !namePattern.MatchString(name) {
			return fmt.Errorf("certs: name %q: want 1-64 characters of [A-Za-z0-9._-]", name)
		}
		if seen[name] {
			return fmt.Errorf("certs: name %q used twice (or reserved)", name)
		}
		seen[name] = true
		return nil
	}
	for _, n := range opts.Nodes {
		if err := check(n.Name); err != nil {
			return nil, err
		}
	}
	for _, c := range opts.Clients {
		if err := check(c); err != nil {
			return nil, err
		}
	}
	tokenSeen := map[string]bool{}
	for _, name := range opts.Tokens {
		if !namePattern.MatchString(name) || tokenSeen[name] {
			return nil, fmt.Errorf("certs: token name %q: want 1-64 characters of [A-Za-z0-9._-], once", name)
		}
		tokenSeen[name] = true
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	var written []string
	if len(opts.Nodes) == 0 && len(opts.Clients) == 0 {
		return writeTokens(opts.Dir, opts.Tokens)
	}
	caCert, caKey := filepath.Join(opts.Dir, CACertFile), filepath.Join(opts.Dir, CAKeyFile)
	ca, err := LoadKeyPair(caCert, caKey)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist):
		ca, err = GenerateCA(CertOptions{CommonName: "LogPlayer CA", Validity: opts.CAValidity})
		if err != nil {
			return nil, err
		}
		if err := ca.WriteFiles(caCert, caKey); err != nil {
			return nil, err
		}
		written = append(written, caCert, caKey)
	default:
		return nil, fmt.Errorf("certs: existing CA: %w", err)
	}
	issue := func(name string, o CertOptions) error {
		kp, err := IssueCert(ca, o)
		if err != nil {
			return err
		}
		cert, key := filepath.Join(opts.Dir, name+".crt"), filepath.Join(opts.Dir, name+".key")
		if err := kp.WriteFiles(cert, key); err != nil {
			return err
		}
		written = append(written, cert, key)
		return nil
	}
	for _, n := range opts.Nodes {
		o := CertOptions{
			CommonName: n.Name, Validity: opts.Validity, Server: true, Client: true,
			DNSNames: []string{"localhost"},
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		for _, h := range n.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				o.IPs = append(o.IPs, ip)
			} else if h != "" {
				o.DNSNames = append(o.DNSNames, h)
			}
		}
		if err := issue(n.Name, o); err != nil {
			return written, err
		}
	}
	for _, c := range opts.Clients {
		if err := issue(c, CertOptions{CommonName: c, Validity: opts.Validity, Client: true}); err != nil {
			return written, err
		}
	}
	tokens, err := writeTokens(opts.Dir, opts.Tokens)
	return append(written, tokens...), err
}

// writeTokens makes a token per name: NAME.token, and its hash appended to
// tokens.jsonl (an earlier line of the same identity stays valid until
// removed by hand: rotation without a gap).
func writeTokens(dir string, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var written, lines []byte
	var files []string
	for _, name := range names {
		tok, line, err := NewToken(name)
		if err != nil {
			return files, err
		}
		path := filepath.Join(dir, name+".token")
		if err := writeAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
			return files, err
		}
		files = append(files, path)
		lines = append(append(lines, line...), '\n')
	}
	path := filepath.Join(dir, TokensFile)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return files, err
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	written = append(old, lines...)
	if err := writeAtomic(path, written, 0o600); err != nil {
		return files, err
	}
	return append(files, path), nil
}
