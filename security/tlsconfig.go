package security

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
)

// ClientAuth is how a TLS server treats client certificates
// (--tls-client-auth none|request|require).
type ClientAuth int

const (
	// ClientAuthNone asks for no client certificate; identities come from
	// bearer tokens only.
	ClientAuthNone ClientAuth = iota
	// ClientAuthRequest verifies a client certificate when one is sent,
	// and accepts clients without one (they may use a bearer token).
	ClientAuthRequest
	// ClientAuthRequire is mutual TLS: a client without a certificate
	// signed by the CA is refused in the handshake.
	ClientAuthRequire
)

var clientAuthNames = [...]string{"none", "request", "require"}

func (c ClientAuth) String() string {
	if c < 0 || int(c) >= len(clientAuthNames) {
		return fmt.Sprintf("ClientAuth(%d)", int(c))
	}
	return clientAuthNames[c]
}

// Set implements flag.Value.
func (c *ClientAuth) Set(s string) error {
	for i, n := range clientAuthNames {
		if s == n {
			*c = ClientAuth(i)
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(clientAuthNames[:], ", "))
}

func (c ClientAuth) tls() tls.ClientAuthType {
	switch c {
	case ClientAuthRequest:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		return tls.RequireAndVerifyClientCert
	default:
		return tls.NoClientCert
	}
}

// MinVersion is the lowest TLS version either side accepts.
const MinVersion = tls.VersionTLS12

// ServerOptions configure a TLS server: the LogStore API, the LogPlayer
// admin API, a target, the Raft transport.
type ServerOptions struct {
	// Files: CertFile and KeyFile are required; CAFile verifies client
	// certificates and is required unless ClientAuth is ClientAuthNone.
	Files      Files
	ClientAuth ClientAuth
	// NextProtos are the ALPN protocols offered ("h2" for gRPC; see
	// GRPCServerCredentials, which sets it).
	NextProtos []string
	Reload     ReloadOptions
}

// ServerTLS makes server *tls.Configs whose certificate and client CAs
// come from a Reloader.
type ServerTLS struct {
	r          *Reloader
	auth       ClientAuth
	nextProtos []string
}

// NewServerTLS loads the files once (failing on any error) and returns the
// server side of a role.
func NewServerTLS(opts ServerOptions) (*ServerTLS, error) {
	if opts.Files.CertFile == "" {
		return nil, errors.New("tls: a server needs a certificate and key file")
	}
	if opts.ClientAuth != ClientAuthNone && opts.Files.CAFile == "" {
		return nil, fmt.Errorf("tls: --tls-client-auth %s needs a CA file to verify clients", opts.ClientAuth)
	}
	r, err := NewReloader(opts.Files, opts.Reload)
	if err != nil {
		return nil, err
	}
	return &ServerTLS{r: r, auth: opts.ClientAuth, nextProtos: opts.NextProtos}, nil
}

// Config returns a server config: every handshake gets a config built from
// the files' current contents (GetConfigForClient), so rotated files take
// effect without a restart.
func (s *ServerTLS) Config() *tls.Config {
	cfg := s.build()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.build(), nil }
	return cfg
}

func (s *ServerTLS) build() *tls.Config {
	m := s.r.current()
	return &tls.Config{
		MinVersion:   MinVersion,
		Certificates: []tls.Certificate{*m.cert},
		ClientAuth:   s.auth.tls(),
		ClientCAs:    m.pool,
		NextProtos:   s.nextProtos,
	}
}

// ClientOptions configure a TLS client: the LogStore client SDK, the CLI,
// LogPlayer dialing the LogStore and its targets, a Raft peer dialing.
type ClientOptions struct {
	// Files: CAFile verifies the server and is required; CertFile and
	// KeyFile are the client certificate for mutual TLS (optional).
	Files Files
	// ServerName, when set, is the name every server certificate must
	// carry; otherwise the host of the dialed address.
	ServerName string
	Reload     ReloadOptions
	// Refusals, when set, records every refused handshake of the
	// connections made with these options (see Refusals).
	Refusals *Refusals
}

// ClientTLS makes client *tls.Configs that verify the server against the
// current CA file and present the current client certificate.
type ClientTLS struct {
	r          *Reloader
	serverName string
	refusals   *Refusals
}

// NewClientTLS loads the files once (failing on any error) and returns the
// client side of a role.
func NewClientTLS(opts ClientOptions) (*ClientTLS, error) {
	if opts.Files.CAFile == "" {
		return nil, errors.New("tls: a client needs a CA file to verify the server")
	}
	r, err := NewReloader(opts.Files, opts.Reload)
	if err != nil {
		return nil, err
	}
	return &ClientTLS{r: r, serverName: opts.ServerName, refusals: opts.Refusals}, nil
}

// Config returns a config for one connection to addr (host:port): the
// server certificate must name ClientOptions.ServerName, or addr's host.
// Go verifies against a fixed RootCAs pool, so each dial takes a fresh
// config (see GRPCClientCredentials and StreamLayer.Dial).
func (c *ClientTLS) Config(addr string) *tls.Config {
	m := c.r.current()
	cfg := &tls.Config{
		MinVersion: MinVersion,
		RootCAs:    m.pool,
		ServerName: c.serverName,
	}
	if cfg.ServerName == "" {
		cfg.ServerName = hostOf(addr)
	}
	// GetClientCertificate, not Certificates: Go would send no certificate
	// when ours is not from a CA the server lists, and the server could
	// then only say "no certificate" instead of "wrong CA".
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if m.cert != nil {
			return m.cert, nil
		}
		return &tls.Certificate{}, nil
	}
	return cfg
}

// hostOf returns the host of a host:port address (the address itself when
// it has no port), without IPv6 brackets.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return strings.Trim(addr, "[]")
}
