// Package edgetest sends raw bytes to a gRPC method, for tests that check
// how a server answers bytes that are not a valid request.
package edgetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Garbage is not a valid encoding of any message: field 1 with wire type 7
// (there is none).
var Garbage = []byte{0x0f, 0xff, 0xff}

// rawCodec sends and receives []byte as they are.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T", v)
	}
	return *b, nil
}
func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// raw is the call option that sends and receives raw bytes.
var raw = grpc.ForceCodec(rawCodec{})

// Conn dials addr (plaintext).
func Conn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Unary calls method on cc with body as the request's bytes and returns
// the call's error.
func Unary(ctx context.Context, cc *grpc.ClientConn, method string, body []byte) error {
	var out []byte
	return cc.Invoke(ctx, method, &body, &out, raw)
}

// Stream opens method on cc as a bidi stream, sends body as one request's
// bytes, closes the send side and reads one response: it returns the
// error of that (nil for a response or io.EOF).
func Stream(ctx context.Context, cc *grpc.ClientConn, method string, body []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, raw)
	if err != nil {
		return err
	}
	if err := s.SendMsg(&body); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var out []byte
	if err := s.RecvMsg(&out); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// WantInvalid fails t unless err is INVALID_ARGUMENT with an ErrorDetail
// of code INVALID_ARGUMENT.
func WantInvalid(t testing.TB, what string, err error) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument || apierr.CodeOf(err) != logstorepb.ErrorCode_INVALID_ARGUMENT {
		t.Fatalf("%s with malformed bytes: %v, want INVALID_ARGUMENT with detail INVALID_ARGUMENT", what, err)
	}
}
