package security

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"
)

// GRPCServerCredentials are gRPC transport credentials for a server
// (grpc.Creds): TLS from s, ALPN h2, and every refused handshake explained
// in one line (Explain) and logged. A plaintext gRPC client gets a gRPC
// status saying the server requires TLS (plaintext.go).
//
// A refused connection is closed gracefully (lingerClose): the client reads
// the TLS alert instead of a reset, so its error says why.
func GRPCServerCredentials(s *ServerTLS, log *slog.Logger) credentials.TransportCredentials {
	if log == nil {
		log = slog.Default()
	}
	s2 := *s
	s2.nextProtos = []string{"h2"}
	return &serverCreds{cfg: s2.Config(), log: log}
}

type serverCreds struct {
	cfg *tls.Config
	log *slog.Logger
}

// ServerHandshake is crypto/tls's handshake plus the refusal handling;
// gRPC has set rawConn's deadline (its connection timeout).
func (c *serverCreds) ServerHandshake(rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	peer := rawConn.RemoteAddr().String()
	pc, plaintext := peekPlaintextHTTP2(rawConn)
	if plaintext {
		refusePlaintextHTTP2(pc)
		lingerClose(pc)
		he := &HandshakeError{Local: "server", Peer: peer, Reason: ErrPlaintext, Err: ErrPlaintext,
			Msg: fmt.Sprintf("refused a plaintext (non-TLS) connection from %s: this port requires TLS", peer)}
		c.log.Warn(he.Error(), "peer", peer)
		return nil, nil, he
	}
	conn := tls.Server(pc, c.cfg)
	if err := conn.Handshake(); err != nil {
		lingerClose(pc)
		if he := Explain("server", peer, err); he != nil {
			c.log.Warn(he.Error(), "peer", peer)
			return nil, nil, he
		}
		return nil, nil, err
	}
	if conn.ConnectionState().NegotiatedProtocol != "h2" {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("tls server: %s negotiated no HTTP/2 (ALPN h2): not a gRPC client", peer)
	}
	return conn, credentials.TLSInfo{
		State:          conn.ConnectionState(),
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}, nil
}

func (c *serverCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("security: server credentials used by a client")
}

func (c *serverCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c *serverCreds) Clone() credentials.TransportCredentials {
	return &serverCreds{cfg: c.cfg.Clone(), log: c.log}
}

// OverrideServerName is deprecated in gRPC and means nothing to a server.
func (c *serverCreds) OverrideServerName(string) error { return nil }

// lingerTimeout bounds how long a refused connection is drained before it
// is closed.
const lingerTimeout = time.Second

// lingerClose closes a refused connection so the peer reads what we wrote
// (a TLS alert): it half-closes, discards what the peer still sends until
// the peer closes or lingerTimeout passes, then closes. Closing at once with
// unread input makes the kernel send a reset, and the peer would see
// "broken pipe" or "connection reset" instead of the reason. It blocks (in
// the caller's per-connection goroutine); a peer that reads our alert
// closes at once, so it is short.
func lingerClose(c net.Conn) {
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(lingerTimeout))
	_, _ = io.Copy(io.Discard, c)
}

// GRPCClientCredentials are gRPC transport credentials for a client
// (grpc.WithTransportCredentials): each connection gets a config from c
// (current CA and client certificate, server name from the dialed
// authority), and refusals are explained in one line (Explain), including
// the ones a TLS 1.3 server sends after the client's handshake returned.
func GRPCClientCredentials(c *ClientTLS) credentials.TransportCredentials {
	return &clientCreds{c: c}
}

type clientCreds struct {
	c *ClientTLS
}

func (cc *clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	peer := conn.RemoteAddr().String()
	// gRPC's TLS handshake takes the server name from the authority.
	if cc.c.serverName != "" {
		authority = cc.c.serverName
	}
	out, info, err := credentials.NewTLS(cc.c.Config(authority)).ClientHandshake(ctx, authority, conn)
	if err != nil {
		err = clientHandshakeError(peer, err)
		if he, ok := err.(*HandshakeError); ok {
			cc.c.refusals.record(he)
		}
		return nil, nil, err
	}
	return &explainConn{Conn: out, local: "client", peer: peer, refusals: cc.c.refusals}, info, nil
}

// clientHandshakeError explains err; a connection closed in the middle of
// our handshake most likely reached a plaintext server.
func clientHandshakeError(peer string, err error) error {
	if he := Explain("client", peer, err); he != nil {
		return he
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		return &HandshakeError{Local: "client", Peer: peer, Reason: ErrPlaintext, Err: err,
			Msg: fmt.Sprintf("%s closed the connection during the TLS handshake: it probably does not serve TLS", peer)}
	}
	return err
}

func (cc *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("security: client credentials used by a server")
}

func (cc *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (cc *clientCreds) Clone() credentials.TransportCredentials { return &clientCreds{c: cc.c} }

// OverrideServerName is deprecated in gRPC; set ClientOptions.ServerName.
func (cc *clientCreds) OverrideServerName(string) error {
	return errors.New("security: set ClientOptions.ServerName instead")
}

// BearerToken is per-RPC credentials (grpc.WithPerRPCCredentials) sending
// "authorization: Bearer <token>". It requires transport security: gRPC
// refuses to dial a plaintext connection with it, and it refuses to send
// the token on a connection that is not private.
type BearerToken string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t BearerToken) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, _ := credentials.RequestInfoFromContext(ctx)
	if err := credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity); err != nil {
		return nil, fmt.Errorf("security: bearer token not sent: %w", err)
	}
	return map[string]string{authorizationHeader: "Bearer " + string(t)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (BearerToken) RequireTransportSecurity() bool { return true }
