package main

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testhttp"
	"github.com/logplayer/logplayer/security"
)

// Banner lines of `logplayer dev` that devHTTPWorks reads.
var (
	bannerStoreHTTP = regexp.MustCompile(`^\s+store (\S+)\s+api .* http (\S+)$`)
	bannerCurl      = regexp.MustCompile(`curl --cacert (\S+) -H "Authorization: Bearer \$\(cat (\S+)\)" https://`)
)

// devHTTPWorks checks the banner of a running `logplayer dev`: every
// store's line names an http address, and GET /v1/status there, over
// TLS with the dev CA and the CLI token the banner's curl line names,
// answers the store's status as JSON.
func devHTTPWorks(t *testing.T, banner []string) {
	t.Helper()
	var ca, tokenFile string
	addrs := map[string]string{}
	for _, line := range banner {
		if m := bannerStoreHTTP.FindStringSubmatch(line); m != nil {
			addrs[m[1]] = m[2]
		}
		if m := bannerCurl.FindStringSubmatch(line); m != nil {
			ca, tokenFile = m[1], m[2]
		}
	}
	if len(addrs) != 3 || ca == "" {
		t.Fatalf("banner without 3 stores' http addresses and a curl line: %q", banner)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := security.NewClientTLS(security.ClientOptions{Files: security.Files{CAFile: ca}})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cli.Config("127.0.0.1"), ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()
	for node, addr := range addrs {
		code, st := testhttp.Call(t, hc, "GET", "https://"+addr+"/v1/status", strings.TrimSpace(string(tok)), "")
		if code != http.StatusOK || st["nodeId"] != node {
			t.Fatalf("GET /v1/status of %s at %s: %d %v", node, addr, code, st)
		}
	}
}
