package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"time"
)

// Certificate generation (what `logplayer certs` runs): ECDSA P-256 keys,
// certificates signed by a CA made here. Go's crypto/x509 only, no openssl.

// Defaults of GenerateCA and IssueCert.
const (
	// DefaultCAValidity is ten years: rotating a CA means re-issuing every
	// certificate, so it outlives the certificates it signs.
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultCertValidity is one year; nodes reload rotated files without
	// a restart (see Reloader).
	DefaultCertValidity = 365 * 24 * time.Hour
	// clockSkew back-dates NotBefore so a peer whose clock is a little behind
	// does not refuse a certificate issued a moment ago.
	clockSkew = 5 * time.Minute
)

// KeyPair is a certificate with its private key, parsed and PEM-encoded.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// CertOptions describes a certificate to issue.
type CertOptions struct {
	// CommonName is the subject CN; with no URI SAN it is the certificate's
	// identity (see IdentityFromCertificate).
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	URIs       []*url.URL
	// NotBefore: zero means now minus a few minutes of clock skew.
	NotBefore time.Time
	// Validity: zero means DefaultCertValidity (DefaultCAValidity for a CA).
	Validity time.Duration
	// Server and Client set the extended key usages; a node needs both (it
	// serves its API and dials its Raft peers). Neither set means both.
	Server, Client bool
}

func (o *CertOptions) validate(isCA bool) error {
	if o.CommonName == "" {
		return errors.New("certificate needs a common name")
	}
	if o.Validity < 0 {
		return fmt.Errorf("certificate validity %v is negative", o.Validity)
	}
	if o.Validity == 0 {
		o.Validity = DefaultCertValidity
		if isCA {
			o.Validity = DefaultCAValidity
		}
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-clockSkew)
	}
	if !o.Server && !o.Client {
		o.Server, o.Client = true, true
	}
	return nil
}

// GenerateCA creates a self-signed CA certificate and key.
func GenerateCA(opts CertOptions) (*KeyPair, error) {
	if err := opts.validate(true); err != nil {
		return nil, err
	}
	tmpl, err := template(opts)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = nil
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	return sign(tmpl, tmpl, key, key)
}

// IssueCert creates a key and a certificate for it signed by ca.
func IssueCert(ca *KeyPair, opts CertOptions) (*KeyPair, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, errors.New("issue certificate: no CA key pair")
	}
	if !ca.Cert.IsCA {
		return nil, fmt.Errorf("issue certificate: %q is not a CA certificate", ca.Cert.Subject.CommonName)
	}
	if err := opts.validate(false); err != nil {
		return nil, err
	}
	tmpl, err := template(opts)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if opts.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if opts.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return sign(tmpl, ca.Cert, key, ca.Key)
}

func template(o CertOptions) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: o.CommonName, Organization: []string{"LogPlayer"}},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotBefore.Add(o.Validity),
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
		URIs:         o.URIs,
	}, nil
}

func sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// WriteFiles writes the certificate (mode 0644) and key (mode 0600). Each
// file is written to a temporary name and renamed, so a node reloading
// them never reads half a file.
func (k *KeyPair) WriteFiles(certPath, keyPath string) error {
	if err := writeAtomic(keyPath, k.KeyPEM, 0o600); err != nil {
		return err
	}
	return writeAtomic(certPath, k.CertPEM, 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadKeyPair reads a PEM certificate and its PEM private key (PKCS#8, EC
// or PKCS#1), for example an existing CA to issue more certificates with.
func LoadKeyPair(certPath, keyPath string) (*KeyPair, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	cert, err := parseCertPEM(certPath, certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM private key", keyPath)
	}
	var key any
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key (%T)", keyPath, key)
	}
	if !ec.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s does not match the certificate in %s", keyPath, certPath)
	}
	return &KeyPair{Cert: cert, Key: ec, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func parseCertPEM(path string, data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cert, nil
}
