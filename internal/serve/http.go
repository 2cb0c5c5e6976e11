package serve

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/vanguard"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/security"
)

// StoreHTTPStopMax bounds the graceful stop of a node's HTTP server.
const StoreHTTPStopMax = 5 * time.Second

// storeTranscoder is vanguardgrpc.NewTranscoder over gs: every service
// the gRPC server holds, in the Connect protocol, gRPC-Web and gRPC, and
// the REST routes of the google.api.http options in proto/logstore.proto
// (vanguard reads them from the method descriptors: one rule per method,
// so Append's route does not claim AppendBatch's as a selector prefix
// would).
func storeTranscoder(gs *grpc.Server) (*vanguard.Transcoder, error) {
	var services []*vanguard.Service
	for name := range gs.GetServiceInfo() {
		services = append(services, vanguard.NewService(name, gs))
	}
	return vanguard.NewTranscoder(services,
		vanguard.WithDefaultServiceOptions(
			vanguard.WithTargetCodecs(vanguard.CodecProto),
			vanguard.WithTargetProtocols(vanguard.ProtocolGRPC)))
}

// StoreHTTP serves a node's gRPC API as JSON over HTTP: the Connect
// protocol (JSON and binary, POST /logplayer.logstore.v1.LogStore/Append),
// gRPC-Web, and the REST routes of proto/logstore.proto's google.api.http
// options, through connectrpc's
// vanguard transcoder over the node's own *grpc.Server. Every request
// runs the gRPC server's handlers with its interceptors (authorization:
// the client certificate of the HTTP connection, the bearer token of the
// Authorization header) and limits, so there is one implementation of
// each method. Errors carry the gRPC status's ErrorDetail (code, applied):
// in a REST error body as google.rpc.Status JSON, in Connect as an error
// detail.
type StoreHTTP struct {
	srv    *http.Server
	addr   string
	served chan struct{} // closed when Serve returned
}

// StartStoreHTTP serves api's services on lis, with TLS when tlsCfg is not
// nil (the API's own TLS settings: the same certificate, client CA and
// client-certificate policy; HTTP/2 and HTTP/1.1 are offered), until Stop.
func StartStoreHTTP(api *StoreAPI, lis net.Listener, tlsCfg *tls.Config, log *slog.Logger) (*StoreHTTP, error) {
	h, err := storeTranscoder(api.gs)
	if err != nil {
		return nil, fmt.Errorf("serve: http transcoder: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/topics/{topic}/messages", topicMessages{next: h})
	mux.Handle("/", h)
	s := &StoreHTTP{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		addr:   lis.Addr().String(),
		served: make(chan struct{}),
	}
	if tlsCfg != nil {
		s.srv.TLSConfig = tlsCfg
		lis = tls.NewListener(lis, tlsCfg)
	} else {
		// Plaintext HTTP/2 (h2c) for gRPC-Web and Connect clients that use it.
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		s.srv.Protocols = &p
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "server", "logstore http "+api.node.ID(), "err", err)
		}
	}()
	return s, nil
}

// Addr is the server's bound address.
func (s *StoreHTTP) Addr() string { return s.addr }

// Stop shuts the server down gracefully, closing it after
// StoreHTTPStopMax, and waits for Serve to return. Nil-safe.
func (s *StoreHTTP) Stop() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), StoreHTTPStopMax)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		_ = s.srv.Close() // calls still running after the bound are cut off
	}
	<-s.served
}

// ListenStoreHTTP listens on addr and serves api there (ServeStoreHTTP).
// An empty addr serves nothing (nil, nil).
func ListenStoreHTTP(api *StoreAPI, addr string, tlsOpts *security.ServerOptions, log *slog.Logger) (*StoreHTTP, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: http listen: %w", err)
	}
	return ServeStoreHTTP(api, lis, tlsOpts, log)
}

// ServeStoreHTTP serves api on lis (StartStoreHTTP): with TLS when tlsOpts
// is not nil (the API's certificate, CA and client-certificate policy;
// certificates reloaded as the API's are). On error it closes lis.
func ServeStoreHTTP(api *StoreAPI, lis net.Listener, tlsOpts *security.ServerOptions, log *slog.Logger) (*StoreHTTP, error) {
	var cfg *tls.Config
	if tlsOpts != nil {
		o := *tlsOpts
		o.NextProtos = []string{"h2", "http/1.1"}
		o.Reload.Log = log
		st, err := security.NewServerTLS(o)
		if err != nil {
			_ = lis.Close()
			return nil, fmt.Errorf("serve: http tls: %w", err)
		}
		cfg = st.Config()
	}
	s, err := StartStoreHTTP(api, lis, cfg, log)
	if err != nil {
		_ = lis.Close()
	}
	return s, err
}

// Bounds of GET /v1/topics/{topic}/messages.
const (
	// TopicMessagesDefault and TopicMessagesMax: messages per answer when
	// limit is absent, and at most.
	TopicMessagesDefault = 100
	TopicMessagesMax     = 1000
	// TopicMessagesWaitMax bounds the long poll (wait).
	TopicMessagesWaitMax = 60 * time.Second
)

// topicMessages serves GET /v1/topics/{topic}/messages?offset=&limit=&wait=
// (REST has no server streams in vanguard): it runs ReadTopic through the
// transcoder as a Connect stream (the same handler, interceptors and
// authorization as every other call) and answers the messages from
// offset (at most limit) as one JSON object {"messages": […],
// "nextOffset": "N"}. With wait (a Go duration, at most
// TopicMessagesWaitMax) and nothing at offset yet, it waits that long for
// the first messages and answers as soon as some arrive (a long poll).
type topicMessages struct{ next http.Handler }

func (h topicMessages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &logstorepb.ReadTopicRequest{Topic: r.PathValue("topic"), MaxMessages: TopicMessagesDefault}
	var wait time.Duration
	var err error
	if v := q.Get("offset"); v != "" {
		if req.FromOffset, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeRESTError(w, http.StatusBadRequest, apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "offset %q: want a number", v))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if req.MaxMessages, err = strconv.ParseUint(v, 10, 64); err != nil || req.MaxMessages == 0 {
			writeRESTError(w, http.StatusBadRequest, apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "limit %q: want a number from 1", v))
			return
		}
		req.MaxMessages = min(req.MaxMessages, TopicMessagesMax)
	}
	if v := q.Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 {
			writeRESTError(w, http.StatusBadRequest, apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "wait %q: want a duration such as 10s", v))
			return
		}
		wait = min(wait, TopicMessagesWaitMax)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if wait > 0 {
		req.Follow = true
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	msg, _ := proto.Marshal(req)
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	inner := r.Clone(ctx)
	inner.Method, inner.URL.Path, inner.URL.RawQuery = http.MethodPost, "/logplayer.logstore.v1.LogStore/ReadTopic", ""
	inner.Body = io.NopCloser(bytes.NewReader(append(frame, msg...)))
	inner.ContentLength = int64(len(frame) + len(msg))
	inner.Header = r.Header.Clone()
	inner.Header.Set("Content-Type", "application/connect+proto")
	inner.Header.Set("Connect-Protocol-Version", "1")
	inner.Header.Del("Content-Length")
	rec := &streamRecorder{header: http.Header{}, status: http.StatusOK, stop: func(n int) {
		if req.Follow && n > 0 {
			cancel() // a long poll answers as soon as something arrived
		}
	}}
	h.next.ServeHTTP(rec, inner)
	if rec.status != http.StatusOK {
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.buf.Bytes())
		return
	}
	if rec.end != nil && !(req.Follow && ctx.Err() != nil) {
		writeRESTError(w, 0, rec.end)
		return
	}
	next := req.FromOffset
	if n := len(rec.msgs); n > 0 {
		next = rec.msgs[n-1].Offset + 1
	}
	body, _ := protojson.Marshal(&logstorepb.ReadTopicResponse{Messages: rec.msgs})
	var out map[string]json.RawMessage
	_ = json.Unmarshal(body, &out)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	if _, ok := out["messages"]; !ok {
		out["messages"] = json.RawMessage("[]")
	}
	out["nextOffset"] = json.RawMessage(strconv.Quote(strconv.FormatUint(next, 10)))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// streamRecorder collects a Connect server stream of ReadTopicResponses
// (binary envelopes) written by the transcoder.
type streamRecorder struct {
	header http.Header
	status int
	buf    bytes.Buffer // unparsed bytes
	msgs   []*logstorepb.TopicMessage
	end    error     // the end-of-stream error, if any
	stop   func(int) // called with the count of messages after each one
}

func (s *streamRecorder) Header() http.Header    { return s.header }
func (s *streamRecorder) WriteHeader(status int) { s.status = status }
func (s *streamRecorder) Flush()                 {}

func (s *streamRecorder) Write(b []byte) (int, error) {
	s.buf.Write(b)
	if s.status != http.StatusOK {
		return len(b), nil
	}
	for s.buf.Len() >= 5 {
		head := s.buf.Bytes()[:5]
		n := int(binary.BigEndian.Uint32(head[1:]))
		if s.buf.Len() < 5+n {
			break
		}
		flags := head[0]
		payload := append([]byte(nil), s.buf.Bytes()[5:5+n]...)
		s.buf.Next(5 + n)
		if flags&0x02 != 0 { // end of stream: JSON {"error": …}
			s.end = connectEndError(payload)
			continue
		}
		var resp logstorepb.ReadTopicResponse
		if err := proto.Unmarshal(payload, &resp); err != nil {
			s.end = apierr.Newf(logstorepb.ErrorCode_INTERNAL, "read topic: undecodable stream message: %v", err)
			continue
		}
		s.msgs = append(s.msgs, resp.Messages...)
		s.stop(len(s.msgs))
	}
	return len(b), nil
}

// connectEndError is the error of a Connect end-of-stream message (nil
// when it carries none), with its ErrorDetail.
func connectEndError(payload []byte) error {
	var end struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details []struct {
				Type  string `json:"type"`
				Value string `json:"value"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(payload, &end); err != nil {
		return apierr.Newf(logstorepb.ErrorCode_INTERNAL, "read topic: undecodable end of stream: %v", err)
	}
	if end.Error == nil {
		return nil
	}
	for _, d := range end.Error.Details {
		if d.Type != "logplayer.logstore.v1.ErrorDetail" {
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		var ed logstorepb.ErrorDetail
		if err == nil && proto.Unmarshal(raw, &ed) == nil {
			return apierr.FromDetail(end.Error.Message, &ed)
		}
	}
	return status.Error(connectCodes[end.Error.Code], end.Error.Message)
}

// connectCodes are the Connect protocol's names of the gRPC codes.
var connectCodes = map[string]codes.Code{
	"canceled": codes.Canceled, "unknown": codes.Unknown, "invalid_argument": codes.InvalidArgument,
	"deadline_exceeded": codes.DeadlineExceeded, "not_found": codes.NotFound, "already_exists": codes.AlreadyExists,
	"permission_denied": codes.PermissionDenied, "resource_exhausted": codes.ResourceExhausted,
	"failed_precondition": codes.FailedPrecondition, "aborted": codes.Aborted, "out_of_range": codes.OutOfRange,
	"unimplemented": codes.Unimplemented, "internal": codes.Internal, "unavailable": codes.Unavailable,
	"data_loss": codes.DataLoss, "unauthenticated": codes.Unauthenticated,
}

// writeRESTError answers err as the REST routes answer errors: the HTTP
// status of its gRPC code (status, when not 0) and a google.rpc.Status
// JSON body whose details hold the ErrorDetail (code, applied, …).
func writeRESTError(w http.ResponseWriter, httpStatus int, err error) {
	st := status.Convert(err)
	if httpStatus == 0 {
		httpStatus = restStatus[st.Code()]
		if httpStatus == 0 {
			httpStatus = http.StatusInternalServerError
		}
	}
	body := map[string]any{"code": int(st.Code()), "message": st.Message()}
	if d := apierr.Detail(err); d != nil {
		j, _ := protojson.Marshal(d)
		var m map[string]any
		_ = json.Unmarshal(j, &m)
		m["@type"] = "type.googleapis.com/logplayer.logstore.v1.ErrorDetail"
		body["details"] = []any{m}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(body)
}

// restStatus is the HTTP status of each gRPC code (google.rpc.Code's
// mapping, as vanguard's REST routes use it).
var restStatus = map[codes.Code]int{
	codes.Canceled: 499, codes.Unknown: 500, codes.InvalidArgument: 400, codes.DeadlineExceeded: 504,
	codes.NotFound: 404, codes.AlreadyExists: 409, codes.PermissionDenied: 403, codes.ResourceExhausted: 429,
	codes.FailedPrecondition: 400, codes.Aborted: 409, codes.OutOfRange: 400, codes.Unimplemented: 501,
	codes.Internal: 500, codes.Unavailable: 503, codes.DataLoss: 500, codes.Unauthenticated: 401,
}
