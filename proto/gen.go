// Package proto holds the LogPlayer wire contracts. The generated Go code lives
// in the sub-packages logstorepb, targetpb, shardpb and playerpb; regenerate it with
//
//	go generate ./proto
//
// which needs protoc (Debian: protobuf-compiler) and the pinned Go plugins
// that scripts/protogen.sh installs.
package proto

//go:generate bash ../scripts/protogen.sh
