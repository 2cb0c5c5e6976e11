package main

// The security flags (docs/SECURITY.md §3-§5): servers take
// --tls-cert/--tls-key/--tls-ca/--tls-client-auth and --auth-policy,
// --auth-tokens; clients take --tls-ca/--tls-cert/--tls-key,
// --tls-server-name and --token-file. Like every flag they come from the
// command line, LOGPLAYER_TLS_CERT, … or the config file. Without
// --tls-cert a server is plaintext and open; without --tls-ca (and
// --token-file) a client dials plaintext.

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/security"
)

// tlsServerFlags are a server's TLS and authorization settings.
type tlsServerFlags struct {
	cert, key, ca  string
	clientAuth     security.ClientAuth
	policy, tokens string
	metricsTLS     bool
}

func (f *tlsServerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "tls-cert", "", "serve TLS with this certificate `file` (PEM; reloaded when it changes)")
	fs.StringVar(&f.key, "tls-key", "", "the private key `file` of --tls-cert")
	fs.StringVar(&f.ca, "tls-ca", "", "CA certificates `file` that verifies client certificates (and, for a LogPlayer, the servers it dials)")
	fs.Var(&f.clientAuth, "tls-client-auth", "client certificates: none, request (verified if sent) or require (mutual TLS)")
	fs.StringVar(&f.policy, "auth-policy", "", "authorize every call by this policy `file` (JSON grants; needs --tls-cert)")
	fs.StringVar(&f.tokens, "auth-tokens", "", "accept the bearer tokens whose hashes are in this `file` (JSON lines; needs --auth-policy)")
	fs.BoolVar(&f.metricsTLS, "metrics-tls", false, "serve /metrics over HTTPS with --tls-cert (no client certificate asked)")
}

// enabled: the server serves TLS.
func (f *tlsServerFlags) enabled() bool { return f.cert != "" }

func (f *tlsServerFlags) serverTLSOptions() security.ServerOptions {
	return security.ServerOptions{
		Files:      security.Files{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key},
		ClientAuth: f.clientAuth,
	}
}

// serverOptions are the gRPC options of the TLS and authorization flags
// (none without --tls-cert); shardTopics are a shard's topics (Shard reads).
func (f *tlsServerFlags) serverOptions(log *slog.Logger, shardTopics []string) ([]grpc.ServerOption, error) {
	if !f.enabled() {
		if f.policy != "" || f.tokens != "" || f.metricsTLS || f.key != "" {
			return nil, usagef("--auth-policy, --auth-tokens, --metrics-tls and --tls-key need --tls-cert (authorization runs over TLS)")
		}
		return nil, nil
	}
	opts, err := security.GRPCServerOptions(security.ServerSettings{
		TLS: f.serverTLSOptions(), PolicyFile: f.policy, TokensFile: f.tokens, ShardTopics: shardTopics, Log: log,
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return opts, nil
}

// setup is serverOptions and metricsConfig: a server role's security.
func (f *tlsServerFlags) setup(log *slog.Logger, shardTopics []string) ([]grpc.ServerOption, *tls.Config, error) {
	opts, err := f.serverOptions(log, shardTopics)
	if err != nil {
		return nil, nil, err
	}
	metricsTLS, err := f.metricsConfig(log)
	return opts, metricsTLS, err
}

// metricsConfig is the /metrics endpoint's TLS config (nil: plain HTTP).
func (f *tlsServerFlags) metricsConfig(log *slog.Logger) (*tls.Config, error) {
	if !f.metricsTLS || !f.enabled() {
		return nil, nil
	}
	srv, err := security.NewServerTLS(security.ServerOptions{
		Files:  security.Files{CertFile: f.cert, KeyFile: f.key},
		Reload: security.ReloadOptions{Log: log},
	})
	if err != nil {
		return nil, usagef("--metrics-tls: %v", err)
	}
	return srv.Config(), nil
}

// tlsClientFlags are a client's TLS and token settings.
type tlsClientFlags struct {
	ca, cert, key string
	serverName    string
	tokenFile     string
	// refusals records the TLS refusals of the connections dialed with
	// these flags, for mistake (set by dialOptions).
	refusals *security.Refusals
}

// register binds every client flag; a LogPlayer (withFiles false) shares
// --tls-ca, --tls-cert and --tls-key with its admin server's flags.
func (f *tlsClientFlags) register(fs *flag.FlagSet, withFiles bool) {
	if withFiles {
		fs.StringVar(&f.ca, "tls-ca", "", "dial with TLS, verifying servers by this CA certificates `file`")
		fs.StringVar(&f.cert, "tls-cert", "", "client certificate `file` for mutual TLS (the identity is its common name)")
		fs.StringVar(&f.key, "tls-key", "", "the private key `file` of --tls-cert")
	}
	fs.StringVar(&f.serverName, "tls-server-name", "", "`name` every server certificate must carry (default: the host dialed)")
	fs.StringVar(&f.tokenFile, "token-file", "", "send the bearer token in this `file` (needs --tls-ca)")
}

// dialOptions are the gRPC options of the flags: none (plaintext) without
// --tls-ca.
func (f *tlsClientFlags) dialOptions() ([]grpc.DialOption, error) {
	if f.ca == "" {
		if f.tokenFile != "" || f.cert != "" || f.serverName != "" {
			return nil, usagef("--token-file, --tls-cert and --tls-server-name need --tls-ca (a token or certificate is only sent over TLS)")
		}
		return nil, nil
	}
	if f.refusals == nil {
		f.refusals = &security.Refusals{}
	}
	opts, err := security.GRPCDialOptions(security.ClientSettings{
		TLS: security.ClientOptions{
			Files:      security.Files{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key},
			ServerName: f.serverName,
			Refusals:   f.refusals,
		},
		TokenFile: f.tokenFile,
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return opts, nil
}

// raftTLSFlags are a LogStore node's Raft transport TLS (always mutual).
type raftTLSFlags struct {
	cert, key, ca string
	peers         stringList
}

func (f *raftTLSFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "raft-tls-cert", "", "Raft mutual TLS certificate `file` (default --tls-cert; Raft runs TLS when either is set)")
	fs.StringVar(&f.key, "raft-tls-key", "", "the private key `file` of --raft-tls-cert (default --tls-key)")
	fs.StringVar(&f.ca, "raft-tls-ca", "", "CA `file` verifying Raft peers (default --tls-ca)")
	fs.Var(&f.peers, "raft-peers", "identities (path.Match `patterns`, comma-separated) allowed to speak Raft (default: the --peer ids)")
}

// errRaftPeers: Raft TLS without a peer list would accept any certificate
// of the CA.
var errRaftPeers = errors.New("raft TLS needs --raft-peers (or --peer): which certificate identities are Raft peers")

// tlsCauses word each TLS refusal for the CLI: the cause, first in the
// error line, and the flag that fixes it.
var tlsCauses = []struct {
	reason     error
	cause, fix string
}{
	{security.ErrWrongName, "wrong TLS server name", "set --tls-server-name to a name the certificate carries, or leave it unset to check the host of --addr"},
	{security.ErrUnknownCA, "unknown CA", "set --tls-ca to the CA file that signed the cluster's certificates"},
	{security.ErrNoClientCert, "no client certificate", "set --tls-cert and --tls-key (this server requires mutual TLS)"},
	{security.ErrPlaintext, "not a TLS server", "drop --tls-ca (and --tls-cert, --token-file) for this server"},
	{security.ErrRefused, "client certificate refused", "check --tls-cert and --tls-key: issued by the server's CA and valid now"},
	{security.ErrExpired, "server certificate expired", "renew the server's certificate (--tls-ca is fine)"},
	{security.ErrNotYetValid, "server certificate not yet valid", "check the clocks of this host and the server"},
	{security.ErrBadCertificate, "server certificate refused", "check the server's certificate against --tls-ca"},
}

// mistake explains a call's failure when a TLS mistake in these flags
// caused it, or returns nil: a plaintext client refused by a TLS server
// (UNAUTHENTICATED: a plaintext client gets no other, since servers
// authorize only over TLS), or a connection failure after a handshake
// this client's connections had refused (security.Refusals: gRPC keeps
// only the text of it). what names the command, addrs the servers.
func (f *tlsClientFlags) mistake(what, addrs string, err error) error {
	code := status.Code(err)
	if f.ca == "" {
		if code == codes.Unauthenticated {
			return fmt.Errorf("TLS required: %s failed: %s serves TLS only: set --tls-ca to the cluster's CA file (and --token-file, or --tls-cert and --tls-key)", what, addrs)
		}
		return nil
	}
	he := f.refusals.Last()
	if he == nil || (code != codes.Unavailable && code != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded)) {
		return nil
	}
	for _, c := range tlsCauses {
		if errors.Is(he, c.reason) {
			return fmt.Errorf("%s: %s failed: %s; %s", c.cause, what, he.Msg, c.fix)
		}
	}
	return fmt.Errorf("TLS refused: %s failed: %s", what, he.Msg)
}
