package security

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pki is a test CA with helpers to issue certificates into a directory.
type pki struct {
	t   *testing.T
	dir string
	ca  *KeyPair
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := GenerateCA(CertOptions{CommonName: name})
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, dir: t.TempDir(), ca: ca}
	if err := os.WriteFile(p.caFile(), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pki) caFile() string { return filepath.Join(p.dir, "ca.crt") }

// issue writes NAME.crt/NAME.key and returns the Files naming them with
// this CA.
func (p *pki) issue(name string, o CertOptions) Files {
	p.t.Helper()
	if o.CommonName == "" {
		o.CommonName = name
	}
	kp, err := IssueCert(p.ca, o)
	if err != nil {
		p.t.Fatal(err)
	}
	f := Files{CAFile: p.caFile(), CertFile: filepath.Join(p.dir, name+".crt"), KeyFile: filepath.Join(p.dir, name+".key")}
	if err := kp.WriteFiles(f.CertFile, f.KeyFile); err != nil {
		p.t.Fatal(err)
	}
	return f
}

// node issues a server+client certificate valid for localhost and 127.0.0.1.
func (p *pki) node(name string) Files {
	return p.issue(name, CertOptions{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}})
}

// logs captures slog records' messages and "err" attributes, one string
// per record.
type logs struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
}

func (l *logs) logger() *slog.Logger {
	l.mu.Lock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	l.mu.Unlock()
	return slog.New(&logHandler{l: l})
}

func (l *logs) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitFor waits until a captured line contains want, and returns it.
func (l *logs) waitFor(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if strings.Contains(line, want) {
				l.mu.Unlock()
				return line
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no log line contains %q; got:\n%s", want, l.all())
		}
	}
}

type logHandler struct{ l *logs }

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			s += " err=" + a.Value.String()
		}
		return true
	})
	h.l.mu.Lock()
	h.l.lines = append(h.l.lines, s)
	close(h.l.changed)
	h.l.changed = make(chan struct{})
	h.l.mu.Unlock()
	return nil
}
func (h *logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logHandler) WithGroup(string) slog.Handler      { return h }
