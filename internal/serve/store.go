package serve

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/security"
)

// StoreAPIStopMax bounds the graceful stop of a node's API server: unary
// calls still waiting on Raft get this long, then are cut off.
const StoreAPIStopMax = 5 * time.Second

// StoreAPI is a logstore.Node's gRPC API being served.
type StoreAPI struct {
	*GRPC
	node   *logstore.Node
	health *health.Server
}

// StartStoreAPI serves n's API on lis: LogStore and Cluster
// (n.RegisterServices), gRPC health (SERVING until Stop) and reflection,
// with n.ServerOptions followed by opts (interceptors, keepalive policy,
// TLS credentials).
func StartStoreAPI(n *logstore.Node, lis net.Listener, log *slog.Logger, opts ...grpc.ServerOption) *StoreAPI {
	s := &StoreAPI{node: n, health: health.NewServer()}
	s.GRPC = StartGRPC("logstore "+n.ID(), lis, func(r grpc.ServiceRegistrar) {
		n.RegisterServices(r)
		healthpb.RegisterHealthServer(r, s.health)
		if gs, ok := r.(*grpc.Server); ok {
			reflection.Register(gs)
		}
	}, log, append(n.ServerOptions(), opts...)...)
	return s
}

// Stop reports NOT_SERVING on health, ends the node's read streams
// (SHUTTING_DOWN) and stops the server gracefully, forcing it after
// StoreAPIStopMax. Close the node after it. Nil-safe.
func (s *StoreAPI) Stop() {
	if s == nil {
		return
	}
	s.health.Shutdown()
	s.node.EndReads()
	s.GRPC.Stop(StoreAPIStopMax)
}

// Store is a served LogStore node: the `logplayer store` role.
type Store struct {
	Node    *logstore.Node
	API     *StoreAPI
	Metrics *Metrics // nil when not served
}

// StartStore listens on cfg.APIAddr (or apiLis when not nil) and on
// metricsAddr (when not empty, serving cfg.Registry), opens the node and
// serves its API with opts. On error it releases what it started; an
// invalid cfg is an error wrapping logstore.ErrConfig.
func StartStore(cfg logstore.Config, apiLis net.Listener, metricsAddr string, log *slog.Logger, opts ...grpc.ServerOption) (_ *Store, err error) {
	if apiLis == nil {
		if cfg.APIAddr == "" {
			return nil, fmt.Errorf("%w: APIAddr is required", logstore.ErrConfig)
		}
		if apiLis, err = net.Listen("tcp", cfg.APIAddr); err != nil {
			return nil, fmt.Errorf("logstore: api listen: %w", err)
		}
	}
	// The node advertises the address it was given (a host name a TLS
	// certificate names, not the IP it resolved to), or the bound one when
	// it has none or asked for a random port.
	if _, port, err := net.SplitHostPort(cfg.APIAddr); err != nil || port == "0" {
		cfg.APIAddr = apiLis.Addr().String()
	}
	s := &Store{}
	defer func() {
		if err != nil {
			_ = apiLis.Close()
			s.Metrics.Stop()
			if s.Node != nil {
				_ = s.Node.Close()
			}
		}
	}()
	if s.Node, err = logstore.NewNode(cfg); err != nil {
		return nil, err
	}
	if s.Metrics, err = StartMetrics(metricsAddr, s.Node.Registry(), log); err != nil {
		return nil, err
	}
	s.API = StartStoreAPI(s.Node, apiLis, log, opts...)
	return s, nil
}

// Close stops the API, then the metrics endpoint, then the node.
func (s *Store) Close() error {
	s.API.Stop()
	s.Metrics.Stop()
	return s.Node.Close()
}

// StoreRole is the whole `logplayer store` role: a node serving its gRPC
// API, its JSON-over-HTTP API and /metrics.
type StoreRole struct {
	*Store
	http    *StoreHTTP
	metrics *Metrics
}

// StartStoreRole starts the node of cfg and its gRPC API (StartStore with
// opts), then its HTTP API on httpAddr (none when empty)
// and its /metrics on metricsAddr (none when empty; TLS when metricsTLS is
// set). On an error it stops what it started; an invalid cfg is an error
// wrapping logstore.ErrConfig.
func StartStoreRole(cfg logstore.Config, httpAddr string, httpTLS *security.ServerOptions, metricsAddr string, metricsTLS *tls.Config, log *slog.Logger, opts ...grpc.ServerOption) (*StoreRole, error) {
	st, err := StartStore(cfg, nil, "", log, opts...)
	if err != nil {
		return nil, err
	}
	hs, err := ListenStoreHTTP(st.API, httpAddr, httpTLS, log)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	ms, err := StartMetricsTLS(metricsAddr, st.Node.Registry(), log, metricsTLS)
	if err != nil {
		hs.Stop()
		_ = st.Close()
		return nil, err
	}
	return &StoreRole{Store: st, http: hs, metrics: ms}, nil
}

// Close stops the HTTP API, then the node and its gRPC API, then /metrics.
func (r *StoreRole) Close() error {
	r.http.Stop()
	err := r.Store.Close()
	r.metrics.Stop()
	return err
}
