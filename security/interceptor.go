package security

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

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
}

// Authorizer authenticates and authorizes every call of a gRPC server by
// the method table (methods.go). It holds no goroutine; the files it reads
// are re-read on change by the calls themselves.
type Authorizer struct {
	policy      *PolicyFile
	tokens      *TokenFile
	shardTopics []string
	log         *slog.Logger
}

// NewAuthorizer checks cfg.
func NewAuthorizer(cfg Config) (*Authorizer, error) {
	if cfg.Policy == nil {
		return nil, errors.New("security: an authorizer needs a policy file")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Authorizer{policy: cfg.Policy, tokens: cfg.Tokens, shardTopics: cfg.ShardTopics, log: cfg.Log}, nil
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

// authenticate finds the caller's identity: a bearer token when the call
// carries one (it must be valid: a bad token is never ignored in favour of
// the certificate), else the verified client certificate. ok is false with
// a nil error when the caller presented neither.
func (a *Authorizer) authenticate(ctx context.Context) (Identity, bool, error) {
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
			return Identity{}, false, errMalformedBearer
		}
		if tlsInfo == nil {
			return Identity{}, false, errTokenOverPlain
		}
		if a.tokens == nil {
			return Identity{}, false, errNoTokens
		}
		id, err := a.tokens.Tokens().Lookup(tok)
		if err != nil {
			return Identity{}, false, err
		}
		return id, true, nil
	}
	// Only verified chains count: PeerCertificates may hold a certificate
	// nobody checked.
	if tlsInfo != nil && len(tlsInfo.State.VerifiedChains) > 0 && len(tlsInfo.State.VerifiedChains[0]) > 0 {
		if id, ok := IdentityFromCertificate(tlsInfo.State.VerifiedChains[0][0]); ok {
			return id, true, nil
		}
	}
	return Identity{}, false, nil
}

// authorize decides a call before its handler runs (for a stream whose
// rule checks the request, the check runs again on its first message:
// see checkRequest). It returns the context with the caller's Access.
func (a *Authorizer) authorize(ctx context.Context, method string) (context.Context, *Access, rule, error) {
	r, known := methods[method]
	id, ok, err := a.authenticate(ctx)
	if r.public {
		// Health checks answer whoever asks, whatever they present.
		if ok && err == nil {
			acc := &Access{Identity: id, grants: a.policy.Policy().grantsFor(id.Name)}
			return withAccess(ctx, acc), acc, r, nil
		}
		return ctx, nil, r, nil
	}
	if err != nil {
		return ctx, nil, r, a.refuse(ctx, method, Identity{}, logstorepb.ErrorCode_UNAUTHENTICATED, err.Error(), nil)
	}
	if !ok {
		return ctx, nil, r, a.refuse(ctx, method, Identity{}, logstorepb.ErrorCode_UNAUTHENTICATED, errNoIdentity.Error(), nil)
	}
	acc := &Access{Identity: id, grants: a.policy.Policy().grantsFor(id.Name)}
	if !known {
		return ctx, nil, r, a.refuse(ctx, method, id, logstorepb.ErrorCode_PERMISSION_DENIED, "method not in the security method table", nil)
	}
	if len(r.roles) > 0 && !hasAny(acc.grants, r.roles) {
		return ctx, nil, r, a.refuse(ctx, method, id, logstorepb.ErrorCode_PERMISSION_DENIED,
			fmt.Sprintf("needs role %s", joinRoles(r.roles)), nil)
	}
	return withAccess(ctx, acc), acc, r, nil
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
	if d := r.check(a, acc.grants, m); d != nil {
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
		ctx, acc, r, err := a.authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		if err := a.checkRequest(ctx, info.FullMethod, acc, r, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor does what UnaryInterceptor does for streams; a rule
// that checks the request checks the stream's first message, and a Read
// stream of a caller that may not read every topic is filtered.
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, acc, r, err := a.authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &authStream{ServerStream: ss, ctx: ctx, a: a, method: info.FullMethod, acc: acc, rule: r})
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
	return s.a.checkRequest(s.ctx, s.method, s.acc, s.rule, m)
}

func (s *authStream) SendMsg(m any) error {
	if s.rule.filterRead && !s.acc.ReadsAllTopics() {
		if resp, ok := m.(*logstorepb.ReadResponse); ok {
			m = filterReadResponse(s.acc, resp)
		}
	}
	return s.ServerStream.SendMsg(m)
}
