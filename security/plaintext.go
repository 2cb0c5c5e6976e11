package security

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// A plaintext gRPC client against a TLS server would only see its
// connection closed ("error reading server preface: EOF"). The server
// instead peeks at the first bytes: an HTTP/2 client preface means a
// plaintext gRPC client, which is answered in plaintext HTTP/2 with a gRPC
// status on its first call, so its error reads "code = Unauthenticated
// desc = this server requires TLS …", with an ErrorDetail of code
// UNAUTHENTICATED. Nothing of the call reaches a handler.

// plaintextRefusal is the status message a plaintext gRPC client receives.
const plaintextRefusal = "this server requires TLS: connect with TLS (a CA file), not plaintext"

// plaintextDetails is the refusal's google.rpc.Status with its
// ErrorDetail (code UNAUTHENTICATED), as gRPC carries it in the
// grpc-status-details-bin trailer (base64 without padding), so this
// refusal is typed like every other (apierr.Detail reads it).
var plaintextDetails = func() string {
	st := status.Convert(apierr.New(logstorepb.ErrorCode_UNAUTHENTICATED, plaintextRefusal, nil)).Proto()
	b, err := proto.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("security: encode the plaintext refusal: %v", err)) // a fixed message always encodes
	}
	return base64.RawStdEncoding.EncodeToString(b)
}()

// plaintextTimeout bounds the plaintext exchange.
const plaintextTimeout = time.Second

// peekedConn is a connection whose first bytes were peeked.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite lets lingerClose half-close the underlying TCP connection.
func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// peekPlaintextHTTP2 reports whether conn starts with the HTTP/2 client
// preface, and returns a conn that still yields every byte.
func peekPlaintextHTTP2(conn net.Conn) (*peekedConn, bool) {
	pc := &peekedConn{Conn: conn, r: bufio.NewReaderSize(conn, len(http2.ClientPreface))}
	head, _ := pc.r.Peek(len(http2.ClientPreface))
	return pc, bytes.Equal(head, []byte(http2.ClientPreface))
}

// refusePlaintextHTTP2 answers a plaintext HTTP/2 client: the server
// preface, then to its first request a trailers-only gRPC response with
// code UNAUTHENTICATED and plaintextRefusal, then GOAWAY. Bounded by
// plaintextTimeout.
func refusePlaintextHTTP2(conn *peekedConn) {
	_ = conn.SetDeadline(time.Now().Add(plaintextTimeout))
	if _, err := io.ReadFull(conn, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		return
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			for _, h := range [][2]string{
				{":status", "200"},
				{"content-type", "application/grpc"},
				{"grpc-status", strconv.Itoa(int(codes.Unauthenticated))},
				{"grpc-message", plaintextRefusal},
				{"grpc-status-details-bin", plaintextDetails},
			} {
				_ = enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{
				StreamID: f.StreamID, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true,
			})
			_ = fr.WriteGoAway(f.StreamID, http2.ErrCodeInadequateSecurity, []byte(plaintextRefusal))
			return
		}
	}
}
