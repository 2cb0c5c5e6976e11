package security

import (
	"context"
	"crypto/x509"
	"fmt"
	"sync/atomic"
)

// Source is how an identity was established.
type Source int

const (
	// SourceCertificate: a client certificate verified in the TLS handshake.
	SourceCertificate Source = iota + 1
	// SourceToken: a bearer token found in the token file.
	SourceToken
)

func (s Source) String() string {
	switch s {
	case SourceCertificate:
		return "certificate"
	case SourceToken:
		return "token"
	default:
		return fmt.Sprintf("Source(%d)", int(s))
	}
}

// Identity is an authenticated caller. Name is what the policy file grants
// roles to.
type Identity struct {
	Name   string
	Source Source
}

func (id Identity) String() string { return id.Name + " (" + id.Source.String() + ")" }

// IdentityFromCertificate is the identity a verified certificate carries:
// its first URI SAN (for example spiffe://cluster/producer-1), else its
// subject common name, else its first DNS SAN. ok is false when it carries
// none of them.
func IdentityFromCertificate(c *x509.Certificate) (Identity, bool) {
	name := certName(c)
	return Identity{Name: name, Source: SourceCertificate}, name != ""
}

func certName(c *x509.Certificate) string {
	switch {
	case c == nil:
		return ""
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	default:
		return ""
	}
}

type accessKey struct{}

// Access is what an authorized call carries in its context: who called and
// what the policy lets them do. Handlers read it with AccessFrom. An open
// stream's grants are replaced when the policy changes (see
// Authorizer.recheck), hence the atomic pointer.
type Access struct {
	Identity Identity
	grants   atomic.Pointer[grantSet]
}

func newAccess(id Identity, g *grantSet) *Access {
	a := &Access{Identity: id}
	a.grants.Store(g)
	return a
}

// AccessFrom returns the Access the server interceptors attached, or nil
// when the server runs without them (security off).
func AccessFrom(ctx context.Context) *Access {
	a, _ := ctx.Value(accessKey{}).(*Access)
	return a
}

func withAccess(ctx context.Context, a *Access) context.Context {
	return context.WithValue(ctx, accessKey{}, a)
}

// CanReadTopic reports whether the caller may read topic's messages (a
// player reads every topic, a consumer the topics its grants match). The
// Read handler uses it to drop slices; a nil Access (security off) reads
// everything.
func (a *Access) CanReadTopic(topic string) bool {
	return a == nil || a.grants.Load().canRead(topic)
}

// ReadsAllTopics reports whether CanReadTopic is true for every topic, so a
// handler can skip per-slice checks.
func (a *Access) ReadsAllTopics() bool {
	return a == nil || a.grants.Load().readsAll()
}

// MayUseProducer reports whether the caller may use the producer name
// (InitProducer's name, or the name behind an Append's producer id; see
// Grant.Producers); a nil Access (security off) may use every name.
func (a *Access) MayUseProducer(name string) bool {
	return a == nil || a.grants.Load().names.allows(name)
}

// MayUseEveryProducer reports whether MayUseProducer is true for every
// name, so a handler can skip looking names up.
func (a *Access) MayUseEveryProducer() bool {
	return a == nil || a.grants.Load().names.every()
}
