package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/security"
)

// The LogStoreWALHTTP system: each client appends its transaction as
// JSON, POST /v1/append (package serve's StoreHTTP: vanguard over the
// node's gRPC server), on an HTTP client of its own (its own
// connections), to the leader's HTTP address. Beside LogStoreWALConns it
// shows what JSON over HTTP costs over gRPC on the same nodes.

// httpClientTimeout bounds one request (the op's context bounds it too).
const httpClientTimeout = 30 * time.Second

// serveHTTP serves each node of c as JSON over HTTP on a random port of
// 127.0.0.1, with sec's HTTP TLS when sec is not nil.
func (c *Cluster) serveHTTP(sec *Security, log *slog.Logger) error {
	var tlsOpts *security.ServerOptions
	if sec != nil {
		if sec.HTTPServer == nil || sec.HTTPClient == nil {
			return fmt.Errorf("bench: %s with TLS needs Security.HTTPServer and HTTPClient", LogStoreWALHTTP)
		}
		tlsOpts = sec.HTTPServer
	}
	for _, st := range c.stores {
		hs, err := serve.ListenStoreHTTP(st.API, "127.0.0.1:0", tlsOpts, log)
		if err != nil {
			return err
		}
		c.https = append(c.https, hs)
	}
	c.httpTLS = sec != nil
	return nil
}

// leaderHTTP is the URL of the leader's HTTP API ("" when no node leads).
func (c *Cluster) leaderHTTP() string {
	for i, n := range c.Nodes {
		if n.IsLeader() && i < len(c.https) {
			if c.httpTLS {
				return "https://" + c.https[i].Addr()
			}
			return "http://" + c.https[i].Addr()
		}
	}
	return ""
}

// httpAppend returns the op that POSTs body to /v1/append of base (the
// leader's URL, https when sec is not nil) on an HTTP client of its own,
// and the client's close. A NOT_LEADER answer (nothing written) that names
// the leader's HTTP address is followed, at most httpLeaderHops times per
// op: a leadership change during the row moves the client as it moves
// the gRPC client.
func httpAppend(base string, body []byte, sec *Security) (op, func()) {
	tr := &http.Transport{ForceAttemptHTTP2: true}
	scheme := "http://"
	if sec != nil {
		tr.TLSClientConfig = sec.HTTPClient.Clone()
		scheme = "https://"
	}
	hc := &http.Client{Transport: tr, Timeout: httpClientTimeout}
	return func(ctx context.Context) error {
		for hop := 0; ; hop++ {
			leader, err := postAppend(ctx, hc, base+"/v1/append", body)
			if leader == "" || hop == httpLeaderHops {
				return err
			}
			base = scheme + leader
		}
	}, tr.CloseIdleConnections
}

// httpLeaderHops bounds the NOT_LEADER hints one op follows.
const httpLeaderHops = 2

// postAppend POSTs body to url; on an error answer it returns the leader
// HTTP address a NOT_LEADER detail names, if any.
func postAppend(ctx context.Context, hc *http.Client, url string, body []byte) (leader string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	if resp.StatusCode == http.StatusOK {
		return "", nil
	}
	var st struct {
		Details []struct {
			Code              string `json:"code"`
			LeaderHTTPAddress string `json:"leaderHttpAddress"`
		} `json:"details"`
	}
	if json.Unmarshal(b, &st) == nil && len(st.Details) > 0 && st.Details[0].Code == "NOT_LEADER" {
		leader = st.Details[0].LeaderHTTPAddress
	}
	return leader, fmt.Errorf("bench: POST %s: %s: %s", url, resp.Status, b)
}
