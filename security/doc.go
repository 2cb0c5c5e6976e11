// Package security is TLS, mutual TLS, identities and per-role
// authorization for every LogPlayer connection. docs/SECURITY.md is the
// operator's view (model, role table, file formats, what is protected);
// this comment is the code's.
//
// Files, one concept each:
//
//	tlsconfig.go    ServerTLS / ClientTLS: *tls.Config per role from PEM files, TLS 1.2+, ClientAuth none|request|require
//	reload.go       watched[T]: a value loaded from files, re-loaded when a file's mtime or size changes; Reloader for certificates
//	credentials.go  gRPC transport credentials (server and client) that explain refusals; BearerToken per-RPC credentials
//	plaintext.go    answering a plaintext gRPC client of a TLS server with a gRPC status that says so
//	explain.go      HandshakeError: crypto/tls and x509 errors worded in one line, with a typed reason (ErrUnknownCA, …)
//	refusals.go     Refusals: the last refused handshake of a client's connections (gRPC keeps only its text)
//	streamlayer.go  raft.StreamLayer over mutual TLS, with a peer-identity check
//	identity.go     Identity (from a verified certificate or a token); Access, what a handler sees (AccessFrom, CanReadTopic)
//	tokens.go       the token file (JSON lines of identity + SHA-256), constant-time lookup
//	policy.go       roles, grants with topic/group patterns, the policy file
//	methods.go      the method table: a rule for every RPC of proto/*.proto; unknown methods are refused
//	interceptor.go  Authorizer: unary and stream server interceptors (UNAUTHENTICATED, PERMISSION_DENIED via apierr)
//	revoke.go       open streams authorized again when the policy or token file changes; those refused are ended
//	setup.go        GRPCServerOptions, GRPCDialOptions: everything from file names, for cmd/
//	certgen.go      GenerateCA, IssueCert, LoadKeyPair (ECDSA P-256)
//	bundle.go       WriteBundle: the CA and node/client certificates of `logplayer certs`
//
// Goroutines: one per Authorizer while streams are open (watchStreams,
// revoke.go): every Config.RecheckInterval it checks the policy and token
// files and authorizes the open streams again; it exits with the last
// stream. Otherwise files are re-read inside the calls that use
// them (a handshake, an RPC), at most once per ReloadOptions.Interval, under
// a mutex held only for the stat and, after a change, the parse. A refused
// TLS connection is drained for at most one second (lingerClose) in the
// per-connection goroutine gRPC or Raft already runs it on, so the peer
// reads the alert instead of a reset. A plaintext gRPC client is answered
// within one second (plaintextTimeout) on the same goroutine.
//
// Bounds: one policy, one token list and one certificate set in memory per
// server, replaced whole on reload; token lookup is linear in the number of
// tokens (constant time per entry, so no timing side channel); one entry
// per open stream (its caller and first request) for the re-checks.
//
// Invariants: an identity comes only from a verified chain
// (VerifiedChains, never PeerCertificates) or a token in the token file; a
// bearer token is neither sent (BearerToken) nor accepted (Authorizer)
// without TLS; a method missing from the method table is refused to every
// identity; a refused call never reaches its handler; a stream whose
// identity loses its token or grant is ended within RecheckInterval.
package security
