package bench

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/security"
)

// Identity is the one certificate of a `bench --tls` run: every server's,
// every client's, and the only Raft peer; the policy grants it every role,
// so each call pays for the check.
const Identity = "bench"

// WithTLS runs fn plaintext (sec nil) and, when on, again over mutual TLS
// with authorization (NewSecurity, in a temporary directory removed after),
// heading each of its tables on w with the mode.
func WithTLS(w io.Writer, log *slog.Logger, on bool, fn func(sec *Security) error) error {
	if !on {
		return fn(nil)
	}
	fmt.Fprintln(w, "TLS off (plaintext):")
	if err := fn(nil); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "logplayer-bench-tls-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sec, err := NewSecurity(dir, log)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTLS on (mutual TLS on the client API, Raft and delivery; every call authorized):")
	return fn(sec)
}

// NewSecurity writes throwaway material into dir and returns the options
// of every server and client of a run.
func NewSecurity(dir string, log *slog.Logger) (*Security, error) {
	if _, err := security.WriteBundle(security.BundleOptions{Dir: dir, Nodes: []security.NodeSpec{{Name: Identity}}}); err != nil {
		return nil, err
	}
	policy := filepath.Join(dir, "policy.json")
	grants := fmt.Sprintf(`{"grants": [{"identity": %[1]q, "role": "player"}, {"identity": %[1]q, "role": "admin"},
  {"identity": %[1]q, "role": "producer", "topics": ["*"]}, {"identity": %[1]q, "role": "consumer", "topics": ["*"], "groups": ["*"]}]}`, Identity)
	if err := os.WriteFile(policy, []byte(grants), 0o600); err != nil {
		return nil, err
	}
	files := security.Files{
		CAFile:   filepath.Join(dir, security.CACertFile),
		CertFile: filepath.Join(dir, Identity+".crt"),
		KeyFile:  filepath.Join(dir, Identity+".key"),
	}
	srv, err := security.GRPCServerOptions(security.ServerSettings{
		TLS: security.ServerOptions{Files: files, ClientAuth: security.ClientAuthRequire}, PolicyFile: policy, Log: log,
	})
	if err != nil {
		return nil, err
	}
	dial, err := security.GRPCDialOptions(security.ClientSettings{TLS: security.ClientOptions{Files: files}})
	if err != nil {
		return nil, err
	}
	httpClient, err := security.NewClientTLS(security.ClientOptions{Files: files})
	if err != nil {
		return nil, err
	}
	return &Security{
		ServerOptions: srv,
		DialOptions:   dial,
		HTTPServer:    &security.ServerOptions{Files: files, ClientAuth: security.ClientAuthRequire},
		HTTPClient:    httpClient.Config("127.0.0.1"),
		RaftStream: func(lis net.Listener) (raft.StreamLayer, error) {
			return serve.RaftTLS(lis, files, []string{Identity}, log)
		},
	}, nil
}
