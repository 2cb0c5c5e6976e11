// Package grpcedge makes a request whose bytes are not a valid protobuf
// message of the method's type answer INVALID_ARGUMENT with an ErrorDetail
// (code INVALID_ARGUMENT), like every other bad input, instead of gRPC's
// INTERNAL "failed to unmarshal the received message" (which reads as a
// server bug).
//
// grpc-go (v1.85, rpc_util.go recv) wraps any error the codec's Unmarshal
// returns into codes.Internal, so a status error from the codec does not get
// through. Instead the server codec (ForceServerCodecV2) never fails on a
// proto message: it resets the message and records the parse error in the
// message's unknown fields under a reserved field number (marker). The
// unary and stream interceptors look for the marker after decoding and
// answer the typed error; the handler never runs on a malformed request
// (unary) or gets the error from Recv (streams), so nothing changes.
//
// A client that itself sends the marker field gets the same
// INVALID_ARGUMENT; a server built without the interceptors would hand the
// handler an empty message, which every handler refuses as incomplete.
//
// StopGracefully (stop.go) is how every server stops: gracefully, forced
// after a bound. Goroutines: StopGracefully runs GracefulStop on one until
// it returns.
package grpcedge

import (
	"bytes"
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// markerField is the field number the codec records a parse error under:
// the largest valid field number, which no message of ours uses.
const markerField protowire.Number = protowire.MaxValidNumber

// markerMagic starts the marker's payload, so an unrelated unknown field
// with the same number is not taken for it.
const markerMagic = "logplayer.grpcedge.malformed:"

// markerPrefix is the tag of the marker field.
var markerPrefix = protowire.AppendTag(nil, markerField, protowire.BytesType)

// ServerOptions are the options a server of ours needs: the marking codec
// and the two interceptors that answer a marked request. Use them on every
// gRPC server that decodes our messages.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec{base: encoding.GetCodecV2(protoenc.Name)}),
		grpc.ChainUnaryInterceptor(unary),
		grpc.ChainStreamInterceptor(stream),
	}
}

// codec is gRPC's proto codec whose Unmarshal marks, rather than fails on,
// bytes that are not a valid message of the target type.
type codec struct{ base encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }
func (c codec) Name() string                           { return c.base.Name() }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	proto.Reset(m)
	b := protowire.AppendBytes(bytes.Clone(markerPrefix), []byte(markerMagic+err.Error()))
	m.ProtoReflect().SetUnknown(b)
	return nil
}

// malformed returns the typed error for a marked message, or nil.
func malformed(method string, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return nil
	}
	u := m.ProtoReflect().GetUnknown()
	if !bytes.HasPrefix(u, markerPrefix) {
		return nil
	}
	payload, n := protowire.ConsumeBytes(u[len(markerPrefix):])
	if n < 0 || !bytes.HasPrefix(payload, []byte(markerMagic)) {
		return nil
	}
	return apierr.New(logstorepb.ErrorCode_INVALID_ARGUMENT,
		fmt.Sprintf("%s: request is not a valid %s: %s", method, m.ProtoReflect().Descriptor().FullName(), payload[len(markerMagic):]), nil)
}

func unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := malformed(info.FullMethod, req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &checkedStream{ServerStream: ss, method: info.FullMethod})
}

// checkedStream answers a marked message from RecvMsg as its error.
type checkedStream struct {
	grpc.ServerStream
	method string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return malformed(s.method, m)
}
