// Package targettest helps tests drive targets: Sender is a fake LogPlayer
// side of one Deliver stream, Log generates deliveries with dense per-topic
// offsets, MemStore is an in-memory target.Store, and Serve runs a
// target.Server on 127.0.0.1:0.
//
// Goroutines: each Sender runs one receiver goroutine that reads the
// stream's acks until it ends; Serve runs the gRPC server's goroutines until
// the test's cleanup. Nothing else.
package targettest
