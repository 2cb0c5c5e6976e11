package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/security"
)

// ErrConfig is wrapped by the errors of a role's configuration: an invalid
// library config (logstore.ErrConfig, logplayer.ErrInvalidConfig) or
// security files that do not load (a certificate, key or CA file). The
// message is the cause's.
var ErrConfig = errors.New("serve: invalid configuration")

// configError marks err as ErrConfig without changing its message.
type configError struct{ err error }

func (e configError) Error() string   { return e.err.Error() }
func (e configError) Unwrap() []error { return []error{ErrConfig, e.err} }

// ConfigError marks err as ErrConfig without changing its message, for the
// roles that run outside this package (internal/serve/playerrole).
func ConfigError(err error) error { return configError{err} }

// StoreRoleConfig is the `logplayer store` role: the node, and where and
// how it serves beyond Node.APIAddr.
type StoreRoleConfig struct {
	Node     logstore.Config
	HTTPAddr string                  // the JSON-over-HTTP API ("": none)
	HTTPTLS  *security.ServerOptions // nil: plaintext
	// MetricsAddr serves the node's /metrics ("": none); over TLS when
	// MetricsTLS is set.
	MetricsAddr string
	MetricsTLS  *tls.Config
	// PeerTLS, when its CertFile is set, is how the node dials the other
	// nodes' APIs: as itself, over TLS (the leader polls their supported
	// versions, logstore/version.go).
	PeerTLS security.Files
	// RaftTLS, when its CertFile is set, runs Raft over mutual TLS on
	// Node.RaftAddr (RaftTLS), with only the identities RaftPeers names.
	RaftTLS   security.Files
	RaftPeers []string
	Options   []grpc.ServerOption // the API server's, after the node's
	Log       *slog.Logger
}

// RunStore runs the `logplayer store` role until ctx is done, then stops it
// (StoreRole.Close). Security files that do not load and an invalid Node
// (logstore.ErrConfig) are errors wrapping ErrConfig.
func RunStore(ctx context.Context, cfg StoreRoleConfig) error {
	st, err := startStoreRole(cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	cfg.Log.Info("shutting down", "node", cfg.Node.ID)
	return st.Close()
}

// startStoreRole starts the role of cfg (StartStoreRole), after its Raft
// TLS stream layer and the node's peer dial options.
func startStoreRole(cfg StoreRoleConfig) (*StoreRole, error) {
	if cfg.RaftTLS.CertFile != "" {
		lis, err := net.Listen("tcp", cfg.Node.RaftAddr)
		if err != nil {
			return nil, fmt.Errorf("logstore: raft listen: %w", err)
		}
		sl, err := RaftTLS(lis, cfg.RaftTLS, cfg.RaftPeers, cfg.Log)
		if err != nil {
			_ = lis.Close()
			return nil, configError{err}
		}
		cfg.Node.RaftStream = sl
	}
	if cfg.PeerTLS.CertFile != "" {
		var err error
		if cfg.Node.PeerDialOptions, err = security.GRPCDialOptions(security.ClientSettings{TLS: security.ClientOptions{Files: cfg.PeerTLS}}); err != nil {
			return nil, configError{err}
		}
	}
	st, err := StartStoreRole(cfg.Node, cfg.HTTPAddr, cfg.HTTPTLS, cfg.MetricsAddr, cfg.MetricsTLS, cfg.Log, cfg.Options...)
	if errors.Is(err, logstore.ErrConfig) {
		return nil, configError{err}
	}
	return st, err
}
