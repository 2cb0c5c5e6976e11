// Package serve starts the network servers of the binary's roles: the
// small startX functions cmd/logplayer, the dev cluster (package
// devcluster) and the test helpers (logstoretest) share, so a library
// (logstore.Node, logplayer.Player, a target) never listens by itself.
//
//   - StartGRPC serves a set of gRPC services on a listener (a target's, the
//     LogPlayer's admin API); StartTarget adds the target's close step.
//   - ListenTarget is a target role's whole serving (`logplayer shard`,
//     `sink`, `events`): listen, StartTarget with the target options, and
//     its /metrics; ListenAdmin a LogPlayer's admin API on an address;
//     StartStoreRole the `logplayer store` role with its HTTP API and
//     /metrics.
//   - StartStoreAPI serves a logstore.Node's API: its services
//     (Node.RegisterServices) with its options (Node.ServerOptions), plus
//     gRPC health and reflection.
//   - StartMetrics / ServeMetricsOn serve a Prometheus gatherer on
//     /metrics (StartMetricsTLS / ServeMetricsTLSOn over HTTPS);
//     ProcessRegistry is a registry with the Go runtime and process
//     collectors.
//   - RaftTLS is a node's mutual-TLS Raft stream layer
//     (logstore.Config.RaftStream) accepting only the named peers.
//   - StartStore is the whole `logplayer store` role: listen, open the
//     node, serve its API and metrics; Store.Close stops them in order.
//   - RunTarget and RunStore are a role's life, what the commands
//     `logplayer shard`/`events`/`sink` and `store` call: start it from a
//     config struct, serve until the context ends, stop it (the `player`
//     role is internal/serve/playerrole's Run, apart because the logplayer
//     package's tests import this one). ErrConfig marks the errors of a
//     role's configuration.
//
// Goroutines: one Serve per started server (gRPC or HTTP), ending when it
// is stopped; a graceful stop runs in a short-lived goroutine bounded by a
// named maximum, after which the server is stopped hard.
package serve
