package devcluster

import (
	"context"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/demo"
)

// WriteBanner prints what `logplayer dev` shows at start: the addresses
// and, unless demoMode, commands to try (caEnv and tokenEnv are the
// environment variables of the CLI's --tls-ca and --token-file).
func (d *Cluster) WriteBanner(w io.Writer, demoMode bool, caEnv, tokenEnv string) {
	where := d.Dir + ", removed at exit"
	if !d.RemoveDir {
		where = d.Dir + ", kept"
	}
	fmt.Fprintf(w, "logplayer dev: 3 LogStore nodes, a LogPlayer and %d targets on 127.0.0.1 (data in %s)\n", len(d.Targets), where)
	for i := range d.StoreAddrs {
		fmt.Fprintf(w, "  store %-8s api %-16s raft %-16s http %s\n", NodeID(i), d.StoreAddrs[i], d.RaftAddrs[i], d.HTTPAddrs[i])
	}
	fmt.Fprintf(w, "  player         admin %s\n", d.AdminAddr())
	for _, t := range d.Targets {
		fmt.Fprintf(w, "  target %-7s %-20s topics %s\n", t.ID, t.Addr(), strings.Join(t.Topics, ","))
	}
	if m := d.MetricsAddr(); m != "" {
		fmt.Fprintf(w, "  metrics        http://%s/metrics\n", m)
	}
	if d.TLSDir != "" {
		fmt.Fprintf(w, "  tls            CA, certificates, policy and token in %s (--insecure: plaintext)\n", d.TLSDir)
	}
	if demoMode {
		return
	}
	addr := "--addr " + strings.Join(d.StoreAddrs, ",")
	fmt.Fprintln(w, "Try, in another terminal:")
	if d.TLSDir != "" {
		fmt.Fprintf(w, "  export %s=%s %s=%s\n", caEnv, d.TLSFiles(CLIToken).CAFile, tokenEnv, d.TokenFile())
	}
	fmt.Fprintf(w, `  logplayer append %s --topic orders='{"id":1}' --put shard-0:user/1=alice
  logplayer tail %s --follow
  logplayer status %s --player %s
`, addr, addr, addr, d.AdminAddr())
	if d.TLSDir != "" {
		fmt.Fprintf(w, "  curl --cacert %s -H \"Authorization: Bearer $(cat %s)\" https://%s/v1/status\n",
			d.TLSFiles(CLIToken).CAFile, d.TokenFile(), d.HTTPAddrs[0])
	} else {
		fmt.Fprintf(w, "  curl http://%s/v1/status\n", d.HTTPAddrs[0])
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}

// Demo runs `dev --demo`: the workload against this cluster for duration,
// with every target audited per apply (their stores are wrapped by the
// Recorder) and the LogPlayer's lag in the progress line; cfg gives the
// workload's settings and where its progress and log go.
func (d *Cluster) Demo(ctx context.Context, cfg demo.SessionConfig) (*demo.Report, error) {
	shards := map[string]string{}
	cfg.Cluster, cfg.Recorder, cfg.Recorded = d.Client, d.Recorder, map[string][]string{}
	cfg.Lag = func() map[string]uint64 {
		out := map[string]uint64{}
		for _, t := range d.Player.Targets() {
			out[t.ID] = t.LagEntries
		}
		return out
	}
	for _, t := range d.Targets {
		cfg.Recorded[t.ID] = t.Topics
		if t.ID != EventsTarget {
			shards[t.ID] = t.Addr()
		}
	}
	dial := func(addr string) (*grpc.ClientConn, error) {
		opts, err := d.DialOptions(CLIToken)
		if err != nil {
			return nil, err
		}
		return grpc.NewClient(addr, opts...)
	}
	return demo.SessionAt(ctx, cfg, shards, dial)
}
