package security

import "sync"

// Refusals remembers the last TLS refusal a client's connections met.
// gRPC hands a failed handshake to the caller as text inside an
// UNAVAILABLE status, or, for a call that waited for a connection until
// its deadline, not at all, so the typed *HandshakeError (its Reason) is
// lost on the way. A client that passes a Refusals in ClientOptions can
// still tell, after a call failed to connect, that TLS refused it and why
// (cmd/logplayer names the cause and the flag that fixes it). The zero
// value is ready; a nil *Refusals records nothing.
type Refusals struct {
	mu   sync.Mutex
	last *HandshakeError
}

func (r *Refusals) record(he *HandshakeError) {
	if r == nil || he == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = he
}

// Last is the most recent refusal, or nil when none happened.
func (r *Refusals) Last() *HandshakeError {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
