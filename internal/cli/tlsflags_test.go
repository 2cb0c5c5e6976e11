package cli

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

// Security flags that cannot work are usage errors naming the flag to add;
// the files of the three flag sets bind to their own names. (The same
// through real commands and servers: cmd/logplayer/tlsflags_test.go.)
func TestTLSFlagsRefusedWithoutTLS(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var srv TLSServerFlags
	var raft RaftTLSFlags
	var cl TLSClientFlags
	srv.Register(fs)
	raft.Register(fs)
	cl.Register(fs, false)
	if err := fs.Parse([]string{"--tls-key", "k", "--raft-tls-cert", "rc", "--raft-tls-key", "rk", "--raft-tls-ca", "ra", "--raft-peers", "n1,n2", "--token-file", "t"}); err != nil {
		t.Fatal(err)
	}
	if raft.TLSFiles != (TLSFiles{Cert: "rc", Key: "rk", CA: "ra"}) || strings.Join(raft.Peers.Items, ",") != "n1,n2" || srv.Key != "k" {
		t.Fatalf("raft %+v, server %+v", raft, srv.TLSFiles)
	}
	var ue *UsageError
	if _, err := srv.ServerOptions(nil, nil); !errors.As(err, &ue) || !strings.Contains(err.Error(), "need --tls-cert") {
		t.Fatalf("server options without --tls-cert: %v", err)
	}
	if opts, err := cl.DialOptions(); !errors.As(err, &ue) || !strings.Contains(err.Error(), "need --tls-ca") || opts != nil {
		t.Fatalf("dial options without --tls-ca: %v", err)
	}
	if mtls, err := srv.MetricsConfig(nil); mtls != nil || err != nil {
		t.Fatalf("metrics TLS without --metrics-tls: %v, %v", mtls, err)
	}
}
