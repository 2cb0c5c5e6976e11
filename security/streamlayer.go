package security

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultHandshakeTimeout bounds a Raft connection's TLS handshake.
const DefaultHandshakeTimeout = 10 * time.Second

// StreamLayerOptions configure mutual TLS between Raft voters.
type StreamLayerOptions struct {
	// Listener accepts peers' connections (the Raft address); the layer
	// owns it and closes it on Close.
	Listener net.Listener
	// Advertise is the address peers dial; nil means Listener.Addr().
	Advertise net.Addr
	// Server verifies dialing peers: ClientAuth is forced to
	// ClientAuthRequire (Raft peers always authenticate each other).
	Server ServerOptions
	// Client is how this node dials peers: its certificate (required) and
	// the CA that verifies them.
	Client ClientOptions
	// PeerAllowed decides, from a peer's verified certificate identity,
	// whether it may speak Raft with us, both ways. Required: a CA that also
	// signs client certificates would otherwise let a producer's
	// certificate send Raft RPCs. PeerPattern builds the common one.
	PeerAllowed func(Identity) bool
	// HandshakeTimeout: zero means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	Log              *slog.Logger
}

// PeerPattern allows peers whose identity matches one of the path.Match
// patterns ("n1", "node-*").
func PeerPattern(patterns ...string) func(Identity) bool {
	return func(id Identity) bool { return matchAny(patterns, id.Name) }
}

// StreamLayer is a raft.StreamLayer over mutual TLS, for
// raft.NewNetworkTransport. Accept returns at once (the handshake of an
// accepted connection runs on its first read or write, in the transport's
// per-connection goroutine, so one slow peer cannot stall accepting); Dial
// handshakes before it returns. A peer whose certificate is refused, or
// whose identity PeerAllowed refuses, gets no Raft traffic; the refusal is
// logged in one line (Explain) on the side that refused.
type StreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	server    *tls.Config
	client    *ClientTLS
	allowed   func(Identity) bool
	timeout   time.Duration
	log       *slog.Logger
	dialer    net.Dialer
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// ErrPeerNotAllowed: the peer's certificate is valid but its identity is
// not a Raft peer (StreamLayerOptions.PeerAllowed).
var ErrPeerNotAllowed = errors.New("peer identity not allowed")

// NewStreamLayer loads the certificates (failing on any error) and returns
// the layer.
func NewStreamLayer(opts StreamLayerOptions) (*StreamLayer, error) {
	if opts.Listener == nil {
		return nil, errors.New("raft tls: no listener")
	}
	if opts.PeerAllowed == nil {
		return nil, errors.New("raft tls: PeerAllowed is required (which identities are Raft peers)")
	}
	if opts.Client.Files.CertFile == "" {
		return nil, errors.New("raft tls: a node needs a client certificate to dial its peers")
	}
	opts.Server.ClientAuth = ClientAuthRequire
	srv, err := NewServerTLS(opts.Server)
	if err != nil {
		return nil, err
	}
	cli, err := NewClientTLS(opts.Client)
	if err != nil {
		return nil, err
	}
	if opts.Advertise == nil {
		opts.Advertise = opts.Listener.Addr()
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &StreamLayer{
		ln: opts.Listener, advertise: opts.Advertise, server: srv.Config(), client: cli,
		allowed: opts.PeerAllowed, timeout: opts.HandshakeTimeout, log: opts.Log,
	}, nil
}

// Accept waits for the next peer connection.
func (l *StreamLayer) Accept() (net.Conn, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, err
	}
	return &serverConn{Conn: tls.Server(c, l.server), l: l}, nil
}

// Close closes the listener.
func (l *StreamLayer) Close() error { return l.ln.Close() }

// Addr is the advertised address.
func (l *StreamLayer) Addr() net.Addr { return l.advertise }

// Dial connects to a peer and completes the handshake within timeout:
// the peer's certificate must be valid for address's host and its identity
// allowed.
func (l *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr := string(address)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	raw, err := l.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, l.client.Config(addr))
	if err := c.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		err = clientHandshakeError(addr, err)
		l.log.Warn("raft tls: dial refused", "peer", addr, "err", err)
		return nil, err
	}
	if err := l.checkPeer("client", addr, c.ConnectionState()); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &explainConn{Conn: c, local: "client", peer: addr}, nil
}

func (l *StreamLayer) checkPeer(local, addr string, cs tls.ConnectionState) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		// Unreachable: both sides require and verify certificates.
		return &HandshakeError{Local: local, Peer: addr, Reason: ErrBadCertificate, Err: ErrBadCertificate,
			Msg: fmt.Sprintf("%s presented no verified certificate", addr)}
	}
	id, _ := IdentityFromCertificate(cs.VerifiedChains[0][0])
	if !l.allowed(id) {
		err := &HandshakeError{Local: local, Peer: addr, Reason: ErrPeerNotAllowed, Err: ErrPeerNotAllowed,
			Msg: fmt.Sprintf("%s presented a valid certificate for %q, which is not a Raft peer", addr, id.Name)}
		l.log.Warn("raft tls: peer refused", "peer", addr, "err", err)
		return err
	}
	return nil
}

// serverConn is an accepted connection; its first read or write runs the
// handshake (bounded by the layer's timeout) and the peer check.
type serverConn struct {
	*tls.Conn
	l    *StreamLayer
	once sync.Once
	err  error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		peer := c.RemoteAddr().String()
		ctx, cancel := context.WithTimeout(context.Background(), c.l.timeout)
		defer cancel()
		if err := c.HandshakeContext(ctx); err != nil {
			if he := Explain("server", peer, err); he != nil {
				err = he
			}
			c.l.log.Warn("raft tls: connection refused", "peer", peer, "err", err)
			c.err = err
			return
		}
		c.err = c.l.checkPeer("server", peer, c.ConnectionState())
	})
	return c.err
}

func (c *serverConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *serverConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
