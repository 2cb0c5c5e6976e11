package cli

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

// TLSFiles are the PEM files of a TLS identity (Cert, Key) and the CA
// certificates that verify the other side (CA).
type TLSFiles struct{ Cert, Key, CA string }

// register binds the files to the flags --<prefix>tls-cert, -key and -ca
// with these usages.
func (f *TLSFiles) register(fs *flag.FlagSet, prefix, cert, key, ca string) {
	fs.StringVar(&f.Cert, prefix+"tls-cert", "", cert)
	fs.StringVar(&f.Key, prefix+"tls-key", "", key)
	fs.StringVar(&f.CA, prefix+"tls-ca", "", ca)
}

// Files are the files as security names them.
func (f TLSFiles) Files() security.Files {
	return security.Files{CAFile: f.CA, CertFile: f.Cert, KeyFile: f.Key}
}

// TLSServerFlags are a server's TLS and authorization settings.
type TLSServerFlags struct {
	TLSFiles
	ClientAuth     security.ClientAuth
	Policy, Tokens string
	MetricsTLS     bool
}

// Register binds the flags.
func (f *TLSServerFlags) Register(fs *flag.FlagSet) {
	f.register(fs, "", "serve TLS with this certificate `file` (PEM; reloaded when it changes)",
		"the private key `file` of --tls-cert",
		"CA certificates `file` that verifies client certificates (and, for a LogPlayer, the servers it dials)")
	fs.Var(&f.ClientAuth, "tls-client-auth", "client certificates: none, request (verified if sent) or require (mutual TLS)")
	fs.StringVar(&f.Policy, "auth-policy", "", "authorize every call by this policy `file` (JSON grants; needs --tls-cert)")
	fs.StringVar(&f.Tokens, "auth-tokens", "", "accept the bearer tokens whose hashes are in this `file` (JSON lines; needs --auth-policy)")
	fs.BoolVar(&f.MetricsTLS, "metrics-tls", false, "serve /metrics over HTTPS with --tls-cert (no client certificate asked)")
}

// Enabled: the server serves TLS.
func (f *TLSServerFlags) Enabled() bool { return f.Cert != "" }

// ServerTLSOptions are the server's TLS files and client certificate policy.
func (f *TLSServerFlags) ServerTLSOptions() security.ServerOptions {
	return security.ServerOptions{Files: f.Files(), ClientAuth: f.ClientAuth}
}

// ServerOptions are the gRPC options of the TLS and authorization flags
// (none without --tls-cert); shardTopics are a shard's topics (Shard reads).
func (f *TLSServerFlags) ServerOptions(log *slog.Logger, shardTopics []string) ([]grpc.ServerOption, error) {
	if !f.Enabled() {
		if f.Policy != "" || f.Tokens != "" || f.MetricsTLS || f.Key != "" {
			return nil, Usagef("--auth-policy, --auth-tokens, --metrics-tls and --tls-key need --tls-cert (authorization runs over TLS)")
		}
		return nil, nil
	}
	opts, err := security.GRPCServerOptions(security.ServerSettings{
		TLS: f.ServerTLSOptions(), PolicyFile: f.Policy, TokensFile: f.Tokens, ShardTopics: shardTopics, Log: log,
	})
	if err != nil {
		return nil, Usagef("%v", err)
	}
	return opts, nil
}

// Setup is ServerOptions and MetricsConfig: a server role's security.
func (f *TLSServerFlags) Setup(log *slog.Logger, shardTopics []string) ([]grpc.ServerOption, *tls.Config, error) {
	opts, err := f.ServerOptions(log, shardTopics)
	if err != nil {
		return nil, nil, err
	}
	metricsTLS, err := f.MetricsConfig(log)
	return opts, metricsTLS, err
}

// MetricsConfig is the /metrics endpoint's TLS config (nil: plain HTTP).
func (f *TLSServerFlags) MetricsConfig(log *slog.Logger) (*tls.Config, error) {
	if !f.MetricsTLS || !f.Enabled() {
		return nil, nil
	}
	srv, err := security.NewServerTLS(security.ServerOptions{
		Files:  security.Files{CertFile: f.Cert, KeyFile: f.Key},
		Reload: security.ReloadOptions{Log: log},
	})
	if err != nil {
		return nil, Usagef("--metrics-tls: %v", err)
	}
	return srv.Config(), nil
}

// TLSClientFlags are a client's TLS and token settings.
type TLSClientFlags struct {
	TLSFiles
	ServerName string
	TokenFile  string
	// refusals records the TLS refusals of the connections dialed with
	// these flags, for Mistake (set by DialOptions).
	refusals *security.Refusals
}

// Register binds every client flag; a LogPlayer (withFiles false) shares
// --tls-ca, --tls-cert and --tls-key with its admin server's flags.
func (f *TLSClientFlags) Register(fs *flag.FlagSet, withFiles bool) {
	if withFiles {
		f.register(fs, "", "client certificate `file` for mutual TLS (the identity is its common name)",
			"the private key `file` of --tls-cert",
			"dial with TLS, verifying servers by this CA certificates `file`")
	}
	fs.StringVar(&f.ServerName, "tls-server-name", "", "`name` every server certificate must carry (default: the host dialed)")
	fs.StringVar(&f.TokenFile, "token-file", "", "send the bearer token in this `file` (needs --tls-ca)")
}

// DialOptions are the gRPC options of the flags: none (plaintext) without
// --tls-ca.
func (f *TLSClientFlags) DialOptions() ([]grpc.DialOption, error) {
	if f.CA == "" {
		if f.TokenFile != "" || f.Cert != "" || f.ServerName != "" {
			return nil, Usagef("--token-file, --tls-cert and --tls-server-name need --tls-ca (a token or certificate is only sent over TLS)")
		}
		return nil, nil
	}
	if f.refusals == nil {
		f.refusals = &security.Refusals{}
	}
	opts, err := security.GRPCDialOptions(security.ClientSettings{
		TLS: security.ClientOptions{
			Files:      f.Files(),
			ServerName: f.ServerName,
			Refusals:   f.refusals,
		},
		TokenFile: f.TokenFile,
	})
	if err != nil {
		return nil, Usagef("%v", err)
	}
	return opts, nil
}

// RaftTLSFlags are a LogStore node's Raft transport TLS (always mutual).
type RaftTLSFlags struct {
	TLSFiles
	Peers StringList
}

// Register binds the flags.
func (f *RaftTLSFlags) Register(fs *flag.FlagSet) {
	f.register(fs, "raft-", "Raft mutual TLS certificate `file` (default --tls-cert; Raft runs TLS when either is set)",
		"the private key `file` of --raft-tls-cert (default --tls-key)",
		"CA `file` verifying Raft peers (default --tls-ca)")
	fs.Var(&f.Peers, "raft-peers", "identities (path.Match `patterns`, comma-separated) allowed to speak Raft (default: the --peer ids)")
}

// ErrRaftPeers: Raft TLS without a peer list would accept any certificate
// of the CA.
var ErrRaftPeers = errors.New("raft TLS needs --raft-peers (or --peer): which certificate identities are Raft peers")

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

// Mistake explains a call's failure when a TLS mistake in these flags
// caused it, or returns nil: a plaintext client refused by a TLS server
// (UNAUTHENTICATED: a plaintext client gets no other, since servers
// authorize only over TLS), or a connection failure after a handshake
// this client's connections had refused (security.Refusals: gRPC keeps
// only the text of it). what names the command, addrs the servers.
func (f *TLSClientFlags) Mistake(what, addrs string, err error) error {
	code := status.Code(err)
	if f.CA == "" {
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
