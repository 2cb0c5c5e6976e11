package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Reasons a TLS handshake is refused. A *HandshakeError wraps one of them,
// so callers branch with errors.Is, never on the message.
var (
	// ErrPlaintext: one side spoke TLS and the other did not.
	ErrPlaintext = errors.New("plaintext peer")
	// ErrUnknownCA: the certificate is not signed by a trusted CA.
	ErrUnknownCA = errors.New("certificate signed by an unknown CA")
	// ErrExpired: the certificate's NotAfter has passed.
	ErrExpired = errors.New("certificate expired")
	// ErrNotYetValid: the certificate's NotBefore is still ahead.
	ErrNotYetValid = errors.New("certificate not yet valid")
	// ErrWrongName: the server certificate does not name the dialed host.
	ErrWrongName = errors.New("certificate for another name")
	// ErrRefused: the peer refused our certificate (its alert says why, as
	// far as TLS tells).
	ErrRefused = errors.New("peer refused our certificate")
	// ErrNoClientCert: mutual TLS and the client presented no certificate.
	ErrNoClientCert = errors.New("client certificate required")
	// ErrBadCertificate: any other verification failure (key usage, …).
	ErrBadCertificate = errors.New("certificate not accepted")
)

// HandshakeError is a refused TLS handshake explained in one line: who
// reports it (Local: "server" or "client"), the peer's address, the reason
// (one of the Err values above) and the crypto/tls error.
type HandshakeError struct {
	Local  string
	Peer   string
	Reason error
	Msg    string
	Err    error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("tls %s: %s", e.Local, e.Msg)
}

func (e *HandshakeError) Unwrap() []error { return []error{e.Reason, e.Err} }

// Explain turns a crypto/tls or x509 error seen by local ("server" or
// "client") on a connection with peer into a *HandshakeError, or returns
// nil when err is not a TLS refusal (EOF, timeouts and closed connections
// stay what they are).
func Explain(local, peer string, err error) *HandshakeError {
	if err == nil {
		return nil
	}
	var he *HandshakeError
	if errors.As(err, &he) {
		return he
	}
	e := &HandshakeError{Local: local, Peer: peer, Err: err}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		e.Reason = ErrPlaintext
		if local == "server" {
			e.Msg = fmt.Sprintf("refused a plaintext (non-TLS) connection from %s: this port requires TLS", peer)
		} else {
			e.Msg = fmt.Sprintf("%s answered in plaintext: it does not serve TLS (remove the TLS settings, or enable TLS on it)", peer)
		}
		return e
	}
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		whose := fmt.Sprintf("the certificate of %s %s", other(local), peer)
		if len(cv.UnverifiedCertificates) > 0 {
			whose = fmt.Sprintf("the certificate of %s %s at %s", other(local), describeCert(cv.UnverifiedCertificates[0]), peer)
		}
		explainVerify(e, whose, cv.Err)
		return e
	}
	if msg, reason, ok := explainAlert(err); ok {
		e.Reason, e.Msg = reason, fmt.Sprintf("%s %s", peer, msg)
		return e
	}
	if local == "server" && strings.Contains(err.Error(), "client didn't provide a certificate") {
		e.Reason = ErrNoClientCert
		e.Msg = fmt.Sprintf("%s presented no client certificate; this server requires mutual TLS", peer)
		return e
	}
	return nil
}

func other(local string) string {
	if local == "server" {
		return "client"
	}
	return "server"
}

// explainVerify words an x509 verification error.
func explainVerify(e *HandshakeError, whose string, err error) {
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var hn x509.HostnameError
	switch {
	case errors.As(err, &ua):
		e.Reason = ErrUnknownCA
		e.Msg = fmt.Sprintf("%s is not signed by a trusted CA (wrong CA file, or a certificate from another cluster)", whose)
	case errors.As(err, &ci) && ci.Reason == x509.Expired:
		c := ci.Cert
		if c != nil && time.Now().Before(c.NotBefore) {
			e.Reason = ErrNotYetValid
			e.Msg = fmt.Sprintf("%s is not valid before %s (check the clocks)", whose, c.NotBefore.UTC().Format(time.RFC3339))
		} else {
			e.Reason = ErrExpired
			at := "its NotAfter"
			if c != nil {
				at = c.NotAfter.UTC().Format(time.RFC3339)
			}
			e.Msg = fmt.Sprintf("%s expired at %s (issue a new one; nodes reload it without a restart)", whose, at)
		}
	case errors.As(err, &hn):
		e.Reason = ErrWrongName
		names := append(append([]string{}, hn.Certificate.DNSNames...), ipStrings(hn.Certificate.IPAddresses)...)
		e.Msg = fmt.Sprintf("%s is for [%s], not %s (wrong address or --tls-server-name)", whose, strings.Join(names, " "), hn.Host)
	default:
		e.Reason = ErrBadCertificate
		e.Msg = fmt.Sprintf("%s is not accepted: %v", whose, err)
	}
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// Alerts a peer sends when it refuses us, worded from our side.
var alertTexts = map[string]struct {
	msg    string
	reason error
}{
	tls.AlertError(48).Error():  {"does not trust our certificate: it is not signed by a CA it accepts", ErrRefused},
	tls.AlertError(45).Error():  {"refused our certificate as expired or not yet valid", ErrRefused},
	tls.AlertError(42).Error():  {"refused our certificate (its own error says why: CA, validity or name)", ErrRefused},
	tls.AlertError(116).Error(): {"requires a client certificate (mutual TLS): configure a certificate and key", ErrNoClientCert},
	tls.AlertError(70).Error():  {"refused our TLS version (TLS 1.2 or later is required)", ErrRefused},
}

func explainAlert(err error) (string, error, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return "", nil, false
	}
	a, ok := alertTexts[op.Err.Error()]
	return a.msg, a.reason, ok
}

// describeCert names a certificate by its identity (see
// IdentityFromCertificate), for messages.
func describeCert(c *x509.Certificate) string {
	if id := certName(c); id != "" {
		return id
	}
	return c.Subject.String()
}

// explainConn explains TLS refusals that surface after the handshake (in
// TLS 1.3 a server refuses a client certificate after the client's
// handshake returned, so the client sees the alert on its first read).
type explainConn struct {
	net.Conn
	local, peer string
	refusals    *Refusals // records what it explains; may be nil
}

func (c *explainConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, c.explain(err)
}

func (c *explainConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	return n, c.explain(err)
}

func (c *explainConn) explain(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	if he := Explain(c.local, c.peer, err); he != nil {
		c.refusals.record(he)
		return he
	}
	return err
}
