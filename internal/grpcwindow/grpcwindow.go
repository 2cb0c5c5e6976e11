// Package grpcwindow gives the LogStore's client API (its server and the
// client SDK) fixed HTTP/2 flow-control windows instead of grpc-go's
// dynamic ones.
//
// With the default (dynamic) windows grpc-go runs a bandwidth-delay
// estimator on each connection: every DATA frame received while no probe
// is out sends a PING, which the peer answers with a PING ACK. A producer
// with a connection of its own has one Append in flight, and the answer
// comes a Raft commit later, so neither the PING nor its ACK can ride on
// another frame: each Append paid two extra writes and two extra reads on
// each side. On loopback with 64 one-connection clients (bench store,
// logstore-wal-conns, one run) that was 219 µs of CPU per transaction
// with dynamic windows and 169-182 µs with fixed ones. Setting a window
// turns the estimator off (grpc-go's rule); the sizes are the estimator's
// own ceiling for a connection (16 MiB) and a stream size that covers an
// AppendBatch of several full requests without waiting for a window
// update on a LAN.
package grpcwindow

import "google.golang.org/grpc"

const (
	// Stream is each stream's receive window.
	Stream = 4 << 20
	// Conn is each connection's receive window.
	Conn = 16 << 20
)

// ServerOptions fix a server's receive windows.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(Stream), grpc.InitialConnWindowSize(Conn)}
}

// DialOptions fix a client connection's receive windows.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(Stream), grpc.WithInitialConnWindowSize(Conn)}
}
