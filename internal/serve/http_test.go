package serve_test

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testhttp"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/security"
)

// httpStore serves a single-voter node over gRPC and JSON over HTTP, both
// with TLS, a policy and a token file, and returns the HTTP base URL, the
// bundle directory and the token of identity "cli" (producer, consumer
// and admin of everything).
func httpStore(t *testing.T) (base, dir, token string) {
	t.Helper()
	dir = t.TempDir()
	if _, err := security.WriteBundle(security.BundleOptions{Dir: dir, Nodes: []security.NodeSpec{{Name: "n0"}},
		Clients: []string{"nobody"}, Tokens: []string{"cli"}}); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(`{"grants": [
  {"identity": "cli", "role": "producer", "topics": ["*"], "producers": ["*"]},
  {"identity": "cli", "role": "consumer", "topics": ["*"], "groups": ["*"]},
  {"identity": "cli", "role": "admin"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsOpts := security.ServerOptions{
		Files:      security.Files{CAFile: filepath.Join(dir, security.CACertFile), CertFile: filepath.Join(dir, "n0.crt"), KeyFile: filepath.Join(dir, "n0.key")},
		ClientAuth: security.ClientAuthRequest,
	}
	opts, err := security.GRPCServerOptions(security.ServerSettings{TLS: tlsOpts, PolicyFile: policy,
		TokensFile: filepath.Join(dir, "tokens.jsonl"), Log: logstoretest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := logstoretest.Config("n0", t.TempDir())
	cfg.RaftListener = logstoretest.Listen(t)
	api := logstoretest.Listen(t)
	cfg.APIAddr = api.Addr().String()
	cfg.Bootstrap = []logstore.Peer{{ID: "n0", RaftAddr: cfg.RaftListener.Addr().String(), APIAddr: cfg.APIAddr}}
	st, err := serve.StartStore(cfg, api, "", logstoretest.QuietLogger(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hs, err := serve.ListenStoreHTTP(st.API, "127.0.0.1:0", &tlsOpts, logstoretest.QuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Stop) // before st.Close (cleanups run last first)
	tok, err := os.ReadFile(filepath.Join(dir, "cli.token"))
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "a leader", st.Node.IsLeader)
	return "https://" + hs.Addr(), dir, strings.TrimSpace(string(tok))
}

// httpClient trusts the bundle's CA and presents identity cert's client
// certificate when cert is not empty.
func httpClient(t *testing.T, dir, cert string) *http.Client {
	t.Helper()
	cli, err := security.NewClientTLS(security.ClientOptions{Files: security.Files{CAFile: filepath.Join(dir, security.CACertFile)}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cli.Config("127.0.0.1")
	if cert != "" {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, cert+".crt"), filepath.Join(dir, cert+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
		cfg.GetClientCertificate = nil
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
}

// errorDetail is the ErrorDetail of a REST error body (a google.rpc.Status).
func errorDetail(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	ds, _ := body["details"].([]any)
	for _, d := range ds {
		if m, ok := d.(map[string]any); ok && m["@type"] == "type.googleapis.com/logplayer.logstore.v1.ErrorDetail" {
			return m
		}
	}
	t.Fatalf("no ErrorDetail in %v", body)
	return nil
}

// TestStoreHTTP: --http-addr serves the LogStore API as JSON: the REST
// routes and the Connect protocol reach the gRPC handlers with the same
// authorization (bearer token, client certificate), and an error carries
// its ErrorDetail's code and applied outcome.
func TestStoreHTTP(t *testing.T) {
	base, dir, token := httpStore(t)
	hc := httpClient(t, dir, "")

	testwait.For(t, 30*time.Second, "cluster version 3 (InitProducer)", func() bool {
		code, st := testhttp.Call(t, hc, "GET", base+"/v1/status", token, "")
		return code == http.StatusOK && st["role"] == "leader" && st["clusterVersion"].(float64) >= 3
	})

	code, resp := testhttp.Call(t, hc, "POST", base+"/v1/append", token,
		`{"slices": [{"topic": "orders", "messages": [{"value": "eyJpZCI6MX0="}]}]}`)
	if code != http.StatusOK || resp["lsn"] != "1" {
		t.Fatalf("POST /v1/append: %d %v", code, resp)
	}

	code, resp = testhttp.Call(t, hc, "POST", base+"/v1/append", token,
		`{"slices": [{"topic": "orders", "messages": [{"value": "eA=="}]}], "conditions": [{"topic": "orders", "expectedNextOffset": "0"}]}`)
	d := errorDetail(t, resp)
	if code != http.StatusBadRequest || d["code"] != "CONDITION_FAILED" || d["applied"] != "APPLIED_NO" || d["actualNextOffset"] != "1" {
		t.Fatalf("failed condition: %d %v", code, resp)
	}

	code, resp = testhttp.Call(t, hc, "POST", base+"/v1/producers", token, `{"name": "billing"}`)
	if code != http.StatusOK || resp["producerId"] == "" || resp["epoch"] != "1" {
		t.Fatalf("POST /v1/producers: %d %v", code, resp)
	}
	producer := `{"slices": [{"topic": "orders", "messages": [{"value": "eQ=="}]}], "producerId": "` + resp["producerId"].(string) + `", "producerEpoch": "1", "sequence": "1"}`
	_, first := testhttp.Call(t, hc, "POST", base+"/v1/append", token, producer)
	_, again := testhttp.Call(t, hc, "POST", base+"/v1/append", token, producer)
	if first["lsn"] != "2" || again["lsn"] != "2" || again["duplicate"] != true {
		t.Fatalf("producer retry over HTTP: first %v, again %v", first, again)
	}

	// Connect protocol, JSON: the gRPC method's path.
	code, resp = testhttp.Call(t, hc, "POST", base+"/logplayer.logstore.v1.LogStore/DescribeTopic", token, `{"topic": "orders"}`)
	if code != http.StatusOK || resp["topic"].(map[string]any)["nextOffset"] != "2" {
		t.Fatalf("Connect DescribeTopic: %d %v", code, resp)
	}
	code, resp = testhttp.Call(t, hc, "POST", base+"/logplayer.logstore.v1.LogStore/Append", token,
		`{"slices": [{"topic": "orders", "messages": [{"value": "eA=="}]}], "conditions": [{"topic": "orders", "expectedNextOffset": "0"}]}`)
	if code != http.StatusBadRequest || resp["code"] != "failed_precondition" ||
		!strings.Contains(fmt.Sprint(resp["details"]), "debug:map[actualNextOffset:2 applied:APPLIED_NO code:CONDITION_FAILED") {
		t.Fatalf("Connect Append with a failed condition: %d %v", code, resp)
	}
	code, resp = testhttp.Call(t, hc, "GET", base+"/v1/topics", token, "")
	if code != http.StatusOK || resp["topicCount"] != "1" {
		t.Fatalf("GET /v1/topics: %d %v", code, resp)
	}

	// Messages by offset, a long poll, and errors of the stream.
	code, resp = testhttp.Call(t, hc, "GET", base+"/v1/topics/orders/messages?offset=1&limit=5", token, "")
	msgs, _ := resp["messages"].([]any)
	if code != http.StatusOK || len(msgs) != 1 || resp["nextOffset"] != "2" ||
		msgs[0].(map[string]any)["offset"] != "1" || msgs[0].(map[string]any)["message"].(map[string]any)["value"] != "eQ==" {
		t.Fatalf("GET messages: %d %v", code, resp)
	}
	polled := make(chan map[string]any, 1)
	go func() {
		_, resp := testhttp.Call(t, hc, "GET", base+"/v1/topics/orders/messages?offset=2&wait=30s", token, "")
		polled <- resp
	}()
	code, resp = testhttp.Call(t, hc, "POST", base+"/v1/append", token, `{"slices": [{"topic": "orders", "messages": [{"value": "eg=="}]}]}`)
	if code != http.StatusOK {
		t.Fatalf("append during the long poll: %d %v", code, resp)
	}
	if resp := <-polled; resp["nextOffset"] != "3" {
		t.Fatalf("long poll answered %v, want the message at offset 2", resp)
	}
	code, resp = testhttp.Call(t, hc, "GET", base+"/v1/topics/orders/messages?offset=3&wait=100ms", token, "")
	if msgs, _ := resp["messages"].([]any); code != http.StatusOK || len(msgs) != 0 || resp["nextOffset"] != "3" {
		t.Fatalf("long poll past the end: %d %v", code, resp)
	}
	code, resp = testhttp.Call(t, hc, "GET", base+"/v1/topics/nothing-here/messages", token, "")
	if d := errorDetail(t, resp); code != http.StatusNotFound || d["code"] != "UNKNOWN_TOPIC" || d["applied"] != "APPLIED_NO" {
		t.Fatalf("messages of an unknown topic: %d %v", code, resp)
	}
	code, resp = testhttp.Call(t, hc, "GET", base+"/v1/topics/orders/messages", "", "")
	if d := errorDetail(t, resp); code != http.StatusUnauthorized || d["code"] != "UNAUTHENTICATED" {
		t.Fatalf("messages without a token: %d %v", code, resp)
	}

	// Authorization is the gRPC server's: no identity, or one without a grant.
	code, resp = testhttp.Call(t, hc, "POST", base+"/v1/append", "", `{"slices": [{"topic": "orders", "messages": [{"value": "eA=="}]}]}`)
	if d := errorDetail(t, resp); code != http.StatusUnauthorized || d["code"] != "UNAUTHENTICATED" || d["applied"] != "APPLIED_NO" {
		t.Fatalf("no token: %d %v", code, resp)
	}
	code, resp = testhttp.Call(t, httpClient(t, dir, "nobody"), "POST", base+"/v1/append", "", `{"slices": [{"topic": "orders", "messages": [{"value": "eA=="}]}]}`)
	if d := errorDetail(t, resp); code != http.StatusForbidden || d["code"] != "PERMISSION_DENIED" {
		t.Fatalf("client certificate without a grant: %d %v", code, resp)
	}
}

// TestStoreHTTPAppendBatch: AppendBatch is served over HTTP, on its own
// REST route (POST /v1/append-batch) and in the Connect protocol, beside
// Append (whose route and name it extends): each request of the batch
// gets its own result, a failed condition its error with the ErrorDetail.
func TestStoreHTTPAppendBatch(t *testing.T) {
	base, dir, token := httpStore(t)
	hc := httpClient(t, dir, "")
	batch := `{"requests": [
  {"slices": [{"topic": "orders", "messages": [{"value": "eA=="}]}]},
  {"slices": [{"topic": "orders", "messages": [{"value": "eQ=="}]}], "conditions": [{"topic": "orders", "expectedNextOffset": "7"}]},
  {"slices": [{"topic": "orders", "messages": [{"value": "eg=="}]}]}]}`
	for _, url := range []string{base + "/v1/append-batch", base + "/logplayer.logstore.v1.LogStore/AppendBatch"} {
		code, resp := testhttp.Call(t, hc, "POST", url, token, batch)
		results, _ := resp["results"].([]any)
		if code != http.StatusOK || len(results) != 3 {
			t.Fatalf("POST %s: %d %v", url, code, resp)
		}
		first := results[0].(map[string]any)["response"].(map[string]any)
		failed, _ := results[1].(map[string]any)["error"].(map[string]any)
		third := results[2].(map[string]any)["response"].(map[string]any)
		if failed == nil || failed["detail"].(map[string]any)["code"] != "CONDITION_FAILED" ||
			failed["detail"].(map[string]any)["applied"] != "APPLIED_NO" || first["lsn"] == nil || third["lsn"] == nil {
			t.Fatalf("POST %s: results %v", url, results)
		}
	}
	// Append keeps its own route beside AppendBatch's.
	code, resp := testhttp.Call(t, hc, "POST", base+"/v1/append", token, `{"slices": [{"topic": "orders", "messages": [{"value": "eA=="}]}]}`)
	if code != http.StatusOK || resp["lsn"] != "5" {
		t.Fatalf("POST /v1/append after the batches: %d %v", code, resp)
	}
}
