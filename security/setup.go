package security

import (
	"errors"
	"log/slog"

	"google.golang.org/grpc"
)

// ServerSettings is everything a gRPC server's security needs, as flags
// give it: what cmd/ fills from --tls-* and --auth-* flags.
type ServerSettings struct {
	TLS ServerOptions
	// PolicyFile: empty serves TLS without authorization (every caller
	// may call everything); set, every call is authorized.
	PolicyFile string
	// TokensFile: the token file (hashes); empty accepts no bearer tokens.
	TokensFile  string
	ShardTopics []string
	Log         *slog.Logger
}

// GRPCServerOptions loads everything once (failing on any error, so a
// misconfigured server does not start) and returns the options for
// grpc.NewServer: TLS credentials, and the interceptors when a policy file
// is set.
func GRPCServerOptions(s ServerSettings) ([]grpc.ServerOption, error) {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.TLS.Reload.Log == nil {
		s.TLS.Reload.Log = s.Log
	}
	srv, err := NewServerTLS(s.TLS)
	if err != nil {
		return nil, err
	}
	opts := []grpc.ServerOption{grpc.Creds(GRPCServerCredentials(srv, s.Log))}
	if s.PolicyFile == "" {
		if s.TokensFile != "" {
			return nil, errors.New("security: a token file needs a policy file (tokens name identities; the policy gives them roles)")
		}
		return opts, nil
	}
	reload := ReloadOptions{Log: s.Log}
	cfg := Config{ShardTopics: s.ShardTopics, Log: s.Log}
	if cfg.Policy, err = LoadPolicyFile(s.PolicyFile, reload); err != nil {
		return nil, err
	}
	if s.TokensFile != "" {
		if cfg.Tokens, err = LoadTokenFile(s.TokensFile, reload); err != nil {
			return nil, err
		}
	}
	a, err := NewAuthorizer(cfg)
	if err != nil {
		return nil, err
	}
	return append(opts, a.ServerOptions()...), nil
}

// ClientSettings is everything a gRPC client's security needs: what cmd/
// fills from --tls-ca, --tls-cert, --tls-key, --tls-server-name and
// --token-file.
type ClientSettings struct {
	TLS ClientOptions
	// TokenFile holds the client's bearer token alone; empty sends none.
	TokenFile string
}

// GRPCDialOptions loads everything once (failing on any error) and returns
// the options for grpc.NewClient (client.Config.DialOptions,
// logplayer.Config.DialOptions).
func GRPCDialOptions(s ClientSettings) ([]grpc.DialOption, error) {
	c, err := NewClientTLS(s.TLS)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(GRPCClientCredentials(c))}
	if s.TokenFile != "" {
		tok, err := ReadTokenFile(s.TokenFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(BearerToken(tok)))
	}
	return opts, nil
}
