package security

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Revocation of open streams. A stream (a follow Read, a Deliver stream)
// is authorized when it opens, and may stay open for days; removing its
// token from the token file or its grant from the policy must end it as
// surely as it refuses the next call. So the Authorizer keeps the open
// streams of authenticated callers, and while there is at least one, a
// goroutine (watchStreams) checks the policy and token files every
// RecheckInterval (the same stat-and-reload as a call does, without the
// reload interval's gating, so an edit is seen within one RecheckInterval). When either
// changed, every open stream is authorized again against the new files,
// as its first call was: the token must still be in the token file, for
// the same identity; the identity must still hold the method's role; the
// stream's first request must still pass the method's check. A stream
// that fails is ended with that refusal (UNAUTHENTICATED or
// PERMISSION_DENIED, its ErrorDetail code, the words "while the stream was
// open"): its handler's context is cancelled, and the interceptor returns
// the refusal as the stream's status. A stream that passes gets the new
// grants (a filtered Read follows the new topic grants at once).
//
// Certificates are not re-verified: a verified chain stays verified (there
// is no revocation list, docs/SECURITY.md §6); revoke a certificate
// identity in the policy.
//
// Goroutines: watchStreams, one per Authorizer while streams are open; it
// exits when the last one closes. Bounds: one entry per open stream.

// openStreams is the set of open streams of an Authorizer.
type openStreams struct {
	mu struct {
		sync.Mutex
		open     map[*openStream]struct{}
		watching bool // watchStreams runs
	}
}

// openStream is one open stream and what authorized it.
type openStream struct {
	method  string
	rule    rule
	peerCtx context.Context // the stream's context, for the refusal's log line
	cancel  context.CancelCauseFunc

	mu struct {
		sync.Mutex
		caller caller
		first  proto.Message // the checked first request; nil before it
		ended  error         // the refusal that ended the stream
	}
}

func (s *openStream) setFirst(m proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.first = m
}

// ended is the refusal that ended the stream, or nil.
func (s *openStream) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.ended
}

// track adds s and starts watchStreams if it is not running.
func (a *Authorizer) track(s *openStream) {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	if a.streams.mu.open == nil {
		a.streams.mu.open = map[*openStream]struct{}{}
	}
	a.streams.mu.open[s] = struct{}{}
	if !a.streams.mu.watching {
		a.streams.mu.watching = true
		go a.watchStreams()
	}
}

func (a *Authorizer) untrack(s *openStream) {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	delete(a.streams.mu.open, s)
}

// OpenStreams is the number of open streams the Authorizer re-checks.
func (a *Authorizer) OpenStreams() int {
	a.streams.mu.Lock()
	defer a.streams.mu.Unlock()
	return len(a.streams.mu.open)
}

// watchStreams re-checks the open streams every recheck interval until
// none is left.
func (a *Authorizer) watchStreams() {
	t := time.NewTicker(a.recheck)
	defer t.Stop()
	for range t.C {
		a.streams.mu.Lock()
		if len(a.streams.mu.open) == 0 {
			a.streams.mu.watching = false
			a.streams.mu.Unlock()
			return
		}
		open := make([]*openStream, 0, len(a.streams.mu.open))
		for s := range a.streams.mu.open {
			open = append(open, s)
		}
		a.streams.mu.Unlock()
		pol := a.policy.w.fresh()
		var toks *Tokens
		if a.tokens != nil {
			toks = a.tokens.w.fresh()
		}
		for _, s := range open {
			a.recheckStream(s, pol, toks)
		}
	}
}

// recheckStream authorizes s again when pol or toks is not what it was
// authorized with, and ends it when it is refused.
func (a *Authorizer) recheckStream(s *openStream, pol *Policy, toks *Tokens) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.mu.caller
	if s.mu.ended != nil || (c.policy == pol && (c.token == "" || c.tokens == toks)) {
		return
	}
	id := c.acc.Identity
	const while = " (revoked while the stream was open)"
	if c.token != "" && c.tokens != toks {
		if got, err := toks.Lookup(c.token); err != nil || got.Name != id.Name {
			a.endStream(s, id, logstorepb.ErrorCode_UNAUTHENTICATED, "bearer token no longer in the token file"+while, nil)
			return
		}
		c.tokens = toks
	}
	g := pol.grantsFor(id.Name)
	if why := roleRefusal(s.rule, g); why != "" {
		a.endStream(s, id, logstorepb.ErrorCode_PERMISSION_DENIED, why+while, nil)
		return
	}
	if s.rule.check != nil && s.mu.first != nil {
		if d := s.rule.check(a, g, s.mu.first); d != nil {
			a.endStream(s, id, logstorepb.ErrorCode_PERMISSION_DENIED, d.msg+while, d)
			return
		}
	}
	c.policy = pol
	c.acc.grants.Store(g)
}

// endStream records the refusal and cancels the handler's context; s.mu
// is held.
func (a *Authorizer) endStream(s *openStream, id Identity, code logstorepb.ErrorCode, why string, d *denial) {
	s.mu.ended = a.refuse(s.peerCtx, s.method, id, code, why, d)
	s.cancel(s.mu.ended)
}
