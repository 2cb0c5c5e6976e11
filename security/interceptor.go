package security

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Config is what a server's Authorizer needs.
type Config struct {
	// Policy grants roles; required.
	Policy *PolicyFile
	// Tokens authenticates bearer tokens; nil accepts none (client
	// certificates only).
	Tokens *TokenFile
	// ShardTopics are the topics a shard server applies: reading the shard
	// needs a consumer grant of each. Only shard servers set it.
	ShardTopics []string
	// Log receives one line per refused call; nil means slog.Default().
	Log *slog.Logger
	// RecheckInterval is how often, while streams are open, the policy and
	// token files are checked for changes and the open streams authorized
	// again (revoke.go); zero means DefaultReloadInterval.
	RecheckInterval time.Duration
}

// Authorizer authenticates and authorizes every call of a gRPC server by
// the method table (methods.go). It holds no goroutine; the files it reads
// are re-read on change by the calls themselves.
type Authorizer struct {
	policy      *PolicyFile
	tokens      *TokenFile
	shardTopics []string
	log         *slog.Logger
	recheck     time.Duration
	streams     openStreams // revoke.go
}

// NewAuthorizer checks cfg.
func NewAuthorizer(cfg Config) (*Authorizer, error) {
	if cfg.Policy == nil {
		return nil, errors.New("security: an authorizer needs a policy file")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = DefaultReloadInterval
	}
	return &Authorizer{policy: cfg.Policy, tokens: cfg.Tokens, shardTopics: cfg.ShardTopics, log: cfg.Log, recheck: cfg.RecheckInterval}, nil
}

// ServerOptions are the interceptors to pass to grpc.NewServer (chained,
// so they compose with a server's own).
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(a.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(a.StreamInterceptor()),
	}
}

// Refusals of authenticate, before the status is built.
var (
	errNoIdentity       = errors.New("no identity: send a client certificate or a bearer token")
	errTokenOverPlain   = errors.New("bearer token refused over a connection without TLS")
	errNoTokens         = errors.New("this server accepts no bearer tokens")
	errMalformedBearer  = errors.New(`malformed authorization metadata: want one "Bearer <token>"`)
	authorizationHeader = "authorization"
)

// authn is what a caller authenticated with.
type authn struct {
	id     Identity
	token  string  // the bearer token; "" for a certificate
	tokens *Tokens // the token file token was found in (nil for a certificate)
}

// caller is who made a call and what it authenticated with: what an open
// stream keeps to be authorized again when the files change (revoke.go).
type caller struct {
	authn
	acc    *Access
	policy *Policy // the policy acc's grants come from
}

func (a *Authorizer) newCaller(au authn) *caller {
	pol := a.policy.Policy()
	return &caller{authn: au, acc: newAccess(au.id, pol.grantsFor(au.id.Name)), policy: pol}
}

// authenticate finds the caller's identity: a bearer token when the call
// carries one (it must be valid: a bad token is never ignored in favour of
// the certificate), else the verified client certificate. ok is false with
// a nil error when the caller presented neither.
func (a *Authorizer) authenticate(ctx context.Context) (authn, bool, error) {
	p, _ := peer.FromContext(ctx)
	var tlsInfo *credentials.TLSInfo
	if p != nil {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			tlsInfo = &ti
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if vals := md.Get(authorizationHeader); len(vals) > 0 {
		tok, found := strings.CutPrefix(vals[0], "Bearer ")
		if len(vals) != 1 || !found || tok == "" {
			return authn{}, false, errMalformedBearer
		}
		if tlsInfo == nil {
			return authn{}, false, errTokenOverPlain
		}
		if a.tokens == nil {
			return authn{}, false, errNoTokens
		}
		toks := a.tokens.Tokens()
		id, err := toks.Lookup(tok)
		if err != nil {
			return authn{}, false, err
		}
		return authn{id: id, token: tok, tokens: toks}, true, nil
	}
	// Only verified chains count: PeerCertificates may hold a certificate
	// nobody checked.
	if tlsInfo != nil && len(tlsInfo.State.VerifiedChains) > 0 && len(tlsInfo.State.VerifiedChains[0]) > 0 {
		if id, ok := IdentityFromCertificate(tlsInfo.State.VerifiedChains[0][0]); ok {
			return authn{id: id}, true, nil
		}
	}
	return authn{}, false, nil
}

// authorize decides a call before its handler runs (for a stream whose
// rule checks the request, the check runs again on its first message:
// see checkRequest). It returns the context with the caller's Access; the
// caller is nil for an anonymous call of a public method.
func (a *Authorizer) authorize(ctx context.Context, method string) (context.Context, *caller, rule, error) {
	r, known := methods[method]
	au, ok, err := a.authenticate(ctx)
	if r.public {
		// Health checks answer whoever asks, whatever they present.
		if ok && err == nil {
			c := a.newCaller(au)
			return withAccess(ctx, c.acc), c, r, nil
		}
		return ctx, nil, r, nil
	}
	if err != nil {
		return ctx, nil, r, a.refuse(ctx, method, Identity{}, logstorepb.ErrorCode_UNAUTHENTICATED, err.Error(), nil)
	}
	if !ok {
		return ctx, nil, r, a.refuse(ctx, method, Identity{}, logstorepb.ErrorCode_UNAUTHENTICATED, errNoIdentity.Error(), nil)
	}
	if !known {
		return ctx, nil, r, a.refuse(ctx, method, au.id, logstorepb.ErrorCode_PERMISSION_DENIED, "method not in the security method table", nil)
	}
	c := a.newCaller(au)
	if why := roleRefusal(r, c.acc.grants.Load()); why != "" {
		return ctx, nil, r, a.refuse(ctx, method, au.id, logstorepb.ErrorCode_PERMISSION_DENIED, why, nil)
	}
	return withAccess(ctx, c.acc), c, r, nil
}

// roleRefusal says why g lacks the roles r needs, or "".
func roleRefusal(r rule, g *grantSet) string {
	if len(r.roles) > 0 && !hasAny(g, r.roles) {
		return fmt.Sprintf("needs role %s", joinRoles(r.roles))
	}
	return ""
}

// checkRequest runs the rule's request check.
func (a *Authorizer) checkRequest(ctx context.Context, method string, acc *Access, r rule, req any) error {
	if r.check == nil || acc == nil {
		return nil
	}
	m, ok := req.(proto.Message)
	if !ok {
		return a.refuse(ctx, method, acc.Identity, logstorepb.ErrorCode_PERMISSION_DENIED, fmt.Sprintf("unexpected request type %T", req), nil)
	}
	if d := r.check(a, acc.grants.Load(), m); d != nil {
		return a.refuse(ctx, method, acc.Identity, logstorepb.ErrorCode_PERMISSION_DENIED, d.msg, d)
	}
	return nil
}

func hasAny(g *grantSet, roles []Role) bool {
	for _, r := range roles {
		if g.has(r) {
			return true
		}
	}
	return false
}

func joinRoles(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

// refuse logs and builds the status: UNAUTHENTICATED or PERMISSION_DENIED
// with an ErrorDetail of the same code (and the topic or group refused).
func (a *Authorizer) refuse(ctx context.Context, method string, id Identity, code logstorepb.ErrorCode, why string, d *denial) error {
	who := "anonymous caller"
	if id.Name != "" {
		who = id.String()
	}
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	a.log.Warn("security: call refused", "method", method, "identity", id.Name, "peer", from, "code", code.String(), "reason", why)
	msg := fmt.Sprintf("%s: %s refused: %s", code, who, why)
	return apierr.New(code, msg, func(ed *logstorepb.ErrorDetail) {
		if d != nil {
			ed.Topic, ed.Group = d.topic, d.group
		}
	})
}

// UnaryInterceptor authenticates, authorizes, and attaches the caller's
// Access to the context (AccessFrom).
func (a *Authorizer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, c, r, err := a.authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		if err := a.checkRequest(ctx, info.FullMethod, c.access(), r, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// access is c's Access, nil for an anonymous caller.
func (c *caller) access() *Access {
	if c == nil {
		return nil
	}
	return c.acc
}

// StreamInterceptor does what UnaryInterceptor does for streams; a rule
// that checks the request checks the stream's first message, and a Read
// stream of a caller that may not read every topic is filtered. While the
// stream is open it is authorized again whenever the policy or token file
// changes, and ended with the refusal when its identity lost the grant
// (revoke.go): the handler sees its context cancelled, and the caller gets
// the refusal instead of what the handler returns.
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, c, r, err := a.authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		as := &authStream{ServerStream: ss, ctx: ctx, a: a, method: info.FullMethod, acc: c.access(), rule: r}
		if c == nil || r.public {
			return handler(srv, as)
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		as.ctx = ctx
		as.open = &openStream{method: info.FullMethod, rule: r, peerCtx: ss.Context(), cancel: cancel}
		as.open.mu.caller = *c
		a.track(as.open)
		defer a.untrack(as.open)
		err = handler(srv, as)
		if ended := as.open.ended(); ended != nil {
			return ended
		}
		return err
	}
}

// authStream checks a stream's first message and filters Read responses.
// gRPC calls RecvMsg and SendMsg of one stream from one goroutine each, so
// checked needs no lock: only RecvMsg touches it.
type authStream struct {
	grpc.ServerStream
	ctx     context.Context
	a       *Authorizer
	method  string
	acc     *Access
	rule    rule
	checked bool
	open    *openStream // nil for a public method
}

func (s *authStream) Context() context.Context { return s.ctx }

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.checked {
		return nil
	}
	s.checked = true
	if err := s.a.checkRequest(s.ctx, s.method, s.acc, s.rule, m); err != nil {
		return err
	}
	if pm, ok := m.(proto.Message); ok && s.open != nil {
		s.open.setFirst(pm)
	}
	return nil
}

func (s *authStream) SendMsg(m any) error {
	if s.rule.filterRead && !s.acc.ReadsAllTopics() {
		if resp, ok := m.(*logstorepb.ReadResponse); ok {
			m = filterReadResponse(s.acc, resp)
		}
	}
	return s.ServerStream.SendMsg(m)
}
