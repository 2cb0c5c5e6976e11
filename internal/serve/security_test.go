package serve_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/security"
)

// TestMetricsOverTLS: StartMetricsTLS serves /metrics over HTTPS only: a
// client trusting the CA scrapes it, a plain HTTP request gets no metrics.
func TestMetricsOverTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := security.WriteBundle(security.BundleOptions{Dir: dir, Nodes: []security.NodeSpec{{Name: "n1"}}}); err != nil {
		t.Fatal(err)
	}
	srv, err := security.NewServerTLS(security.ServerOptions{Files: security.Files{
		CertFile: filepath.Join(dir, "n1.crt"), KeyFile: filepath.Join(dir, "n1.key")}})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := security.NewClientTLS(security.ClientOptions{Files: security.Files{CAFile: filepath.Join(dir, security.CACertFile)}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "tls_test_total"}))
	m, err := serve.StartMetricsTLS("127.0.0.1:0", reg, logstoretest.QuietLogger(), srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cli.Config(m.Addr())}}
	resp, err := hc.Get("https://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "tls_test_total 0") {
		t.Fatalf("https scrape: %s: %.500s", resp.Status, body)
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	if resp, err := plain.Get("http://" + m.Addr() + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "tls_test_total") {
			t.Fatal("plain HTTP scrape got the metrics")
		}
	}
}
