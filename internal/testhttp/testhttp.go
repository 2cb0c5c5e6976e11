// Package testhttp sends the JSON requests of the tests of the JSON over
// HTTP API (internal/serve's StoreHTTP) and decodes their answers.
package testhttp

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Call sends one request with a JSON body (none when body is empty) and
// the bearer token (none when empty), and decodes its JSON answer; a
// test fails on a transport error or an answer that is not a JSON
// object. A URL naming a gRPC method (/logplayer.logstore.v1.…) is sent
// with the Connect protocol's version header.
func Call(t testing.TB, hc *http.Client, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if strings.Contains(url, "/logplayer.logstore.v1.") {
		req.Header.Set("Connect-Protocol-Version", "1")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %s: not JSON: %q", method, url, resp.Status, b)
	}
	return resp.StatusCode, out
}
