package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	clireport "github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/devcluster"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// startTestDev starts the dev cluster in-process on random ports.
func startTestDev(t *testing.T) *devCluster {
	t.Helper()
	return startTestDevIn(t, t.TempDir())
}

// startTestDevIn starts the dev cluster (TLS and tokens, as by default)
// on the data in dir, and points the client commands at its CA and CLI
// token through the environment (LOGPLAYER_TLS_CA, LOGPLAYER_TOKEN_FILE).
func startTestDevIn(t *testing.T, dir string) *devCluster {
	t.Helper()
	d := startTestDevWith(t, &devCmd{portBase: portBaseValue{port: 0, set: true}, dataDir: dir})
	t.Setenv(app.EnvName("tls-ca"), d.TLSFiles(devcluster.CLIToken).CAFile)
	t.Setenv(app.EnvName("token-file"), d.TokenFile())
	return d
}

func startTestDevWith(t *testing.T, c *devCmd) *devCluster {
	t.Helper()
	s := &cli.Sys{Stderr: io.Discard, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d, err := startDev(ctx, s, c)
	if err != nil {
		t.Fatalf("start dev cluster: %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

// dialCLI connects to a server of d as the CLI token.
func dialCLI(t *testing.T, d *devCluster, addr string) *grpc.ClientConn {
	t.Helper()
	opts, err := d.DialOptions(devcluster.CLIToken)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// A dev cluster on random ports restarts on its data directory: the stores
// come back on the addresses their Raft configuration names, and the log
// and the shards' data continue.
func TestDevRestartsOnItsDataDir(t *testing.T) {
	dir := t.TempDir()
	d := startTestDevIn(t, dir)
	addr := "--addr=" + strings.Join(d.StoreAddrs, ",")
	code, out, errOut := runCLI(t, nil, "append", addr, "--topic", `orders={"id":1}`, "--put", "shard-1:k=v1")
	if code != cli.ExitOK {
		t.Fatalf("append: exit %d, %q", code, errOut)
	}
	first := jsonLines(t, out)[0]["lsn"].(float64)
	stores := d.StoreAddrs
	d.Stop()

	d = startTestDevIn(t, dir)
	if strings.Join(d.StoreAddrs, ",") != strings.Join(stores, ",") {
		t.Fatalf("stores moved from %v to %v", stores, d.StoreAddrs)
	}
	code, out, errOut = runCLI(t, nil, "append", addr, "--topic", `orders={"id":2}`)
	if code != cli.ExitOK {
		t.Fatalf("append after restart: exit %d, %q", code, errOut)
	}
	if res := jsonLines(t, out)[0]; res["lsn"].(float64) != first+1 || res["offsets"].(map[string]any)["orders"] != 1.0 {
		t.Fatalf("after restart: %v, want lsn %v and orders offset 1", res, first+1)
	}
	cc := dialCLI(t, d, d.Targets[1].Addr())
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc := shardpb.NewShardClient(cc)
	if _, err := sc.WaitApplied(ctx, &shardpb.WaitAppliedRequest{Lsn: uint64(first)}); err != nil {
		t.Fatalf("shard-1 did not apply lsn %v after the restart: %v", first, err)
	}
	got, err := sc.Get(ctx, &shardpb.GetRequest{Key: []byte("k")})
	if err != nil || string(got.Value) != "v1" {
		t.Fatalf("shard-1 k after restart: %v, %v", got, err)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// wantRuntimeError asserts exit code 1 with exactly one stderr line
// containing want.
func wantRuntimeError(t *testing.T, code int, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if code != cli.ExitRuntime || len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("exit %d, stderr %q: want exit 1 and one line containing %q", code, stderr, want)
	}
}

func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestAppendTailStatusAgainstCluster(t *testing.T) {
	d := startTestDev(t)
	addr := "--addr=" + strings.Join(d.StoreAddrs, ",")

	code, out, errOut := runCLI(t, nil, "append", addr, "--topic", `orders={"id": 1}`, "--topic", `inventory={"sku":1}`,
		"--put", "shard-0:user/1=alice", "--key", "k1")
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("append: exit %d, stderr %q", code, errOut)
	}
	res := jsonLines(t, out)[0]
	lsn := uint64(res["lsn"].(float64))
	if offs := res["offsets"].(map[string]any); lsn == 0 || offs["orders"] != 0.0 || offs["shard-0"] != 0.0 {
		t.Fatalf("append result %v", res)
	}

	// The shard target received the mutation through the LogPlayer.
	cc := dialCLI(t, d, d.Targets[0].Addr())
	defer cc.Close()
	sc := shardpb.NewShardClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := sc.WaitApplied(ctx, &shardpb.WaitAppliedRequest{Lsn: lsn}); err != nil {
		t.Fatalf("shard-0 did not apply lsn %d: %v", lsn, err)
	}
	got, err := sc.Get(ctx, &shardpb.GetRequest{Key: []byte("user/1")})
	if err != nil || !got.Found || string(got.Value) != "alice" {
		t.Fatalf("shard-0 user/1 = %v, %v", got, err)
	}

	// Idempotent producer: the retry answers the first result.
	var first map[string]any
	for i, wantDup := range []bool{false, true} {
		code, out, errOut = runCLI(t, nil, "append", addr, "--topic", `orders={"id":2}`, "--producer-id", "cli-test", "--sequence", "1")
		if code != cli.ExitOK {
			t.Fatalf("producer append %d: exit %d, %q", i, code, errOut)
		}
		r := jsonLines(t, out)[0]
		if dup, _ := r["duplicate"].(bool); dup != wantDup {
			t.Fatalf("producer append %d: %v, want duplicate=%v", i, r, wantDup)
		}
		if i == 0 {
			first = r
		} else if r["lsn"] != first["lsn"] {
			t.Fatalf("retry lsn %v, first %v", r["lsn"], first["lsn"])
		}
	}

	// A refused append: one line naming the reason, exit 1, nothing written.
	code, _, errOut = runCLI(t, nil, "append", addr, "--topic", `orders={"id":3}`, "--expect", "orders=99")
	wantRuntimeError(t, code, errOut, "CONDITION_FAILED")
	code, _, errOut = runCLI(t, nil, "append", addr, "--topic", `bad topic!={"id":3}`)
	wantRuntimeError(t, code, errOut, "INVALID_TOPIC")
	// Bad input at the edge: malformed JSON, unknown flag.
	code, _, errOut = runCLI(t, nil, "append", addr, "--topic", `orders={"id":`)
	wantUsage(t, code, errOut, "malformed JSON")
	code, _, errOut = runCLI(t, nil, "tail", addr, "--bogus")
	wantUsage(t, code, errOut, "flag provided but not defined: --bogus")

	// tail: the whole log, two transactions, values rendered.
	code, out, errOut = runCLI(t, nil, "tail", addr)
	if code != cli.ExitOK {
		t.Fatalf("tail: exit %d, %q", code, errOut)
	}
	txns := jsonLines(t, out)
	if len(txns) != 2 || uint64(txns[0]["lsn"].(float64)) != lsn {
		t.Fatalf("tail printed %d transactions: %s", len(txns), out)
	}
	for _, want := range []string{`"value":{"id":1}`, `"mutation":{"op":"PUT","key":"user/1","value":"alice"}`, `"key":"k1"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("tail output lacks %s:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, nil, "tail", addr, "--filter", "inventory")
	if lines := jsonLines(t, out); code != cli.ExitOK || len(lines) != 1 {
		t.Fatalf("tail --filter inventory: exit %d, %d lines", code, len(lines))
	}
	code, out, errOut = runCLI(t, nil, "tail", addr, "--topic", "orders", "--offset", "1")
	if lines := jsonLines(t, out); code != cli.ExitOK || len(lines) != 1 || lines[0]["offset"] != 1.0 || lines[0]["topic"] != "orders" {
		t.Fatalf("tail --topic orders --offset 1: exit %d, %q, %s", code, errOut, out)
	}

	// status: a table, and JSON with three nodes and the topics.
	code, out, errOut = runCLI(t, nil, "status", addr)
	if code != cli.ExitOK || !strings.Contains(out, "leader") || !strings.Contains(out, "orders") || !strings.Contains(out, "RAFT TERM") {
		t.Fatalf("status: exit %d, %q\n%s", code, errOut, out)
	}
	code, out, _ = runCLI(t, nil, "status", addr, "--json")
	var st clireport.Status
	if err := json.Unmarshal([]byte(out), &st); code != cli.ExitOK || err != nil {
		t.Fatalf("status --json: exit %d, %v: %s", code, err, out)
	}
	if len(st.Nodes) != 3 || st.Leader == "" || len(st.Servers) != 3 || len(st.Topics) < 3 || st.Nodes[0].RaftTerm == 0 {
		t.Fatalf("status --json: %+v", st)
	}
	// With the LogPlayer's targets: all four, none blocked, shard-0 and the
	// events target acked the append (any JSON is an event).
	testwait.For(t, 30*time.Second, "status --player listing four targets", func() bool {
		code, out, errOut := runCLI(t, nil, "status", addr, "--player", d.AdminAddr(), "--json")
		var st clireport.Status
		if err := json.Unmarshal([]byte(out), &st); code != cli.ExitOK || err != nil || st.Player == nil || len(st.Player.Targets) != 4 {
			t.Fatalf("status --player: exit %d, %q, %v: %s", code, errOut, err, out)
		}
		for _, tr := range st.Player.Targets {
			if tr.Blocked {
				t.Fatalf("target %s blocked: %s", tr.ID, tr.LastError)
			}
		}
		ev, s0 := st.Player.Targets[0], st.Player.Targets[1]
		return ev.ID == "events" && ev.LastAckLSN >= lsn && s0.ID == "shard-0" && s0.LastAckLSN >= lsn
	})
	code, out, _ = runCLI(t, nil, "status", addr, "--player", d.AdminAddr())
	if code != cli.ExitOK || !strings.Contains(out, "LAST ACK") || !strings.Contains(out, "shard-2") {
		t.Fatalf("status --player table: exit %d\n%s", code, out)
	}

	// One node unreachable: still exit 0, the node shown as unreachable.
	code, out, _ = runCLI(t, nil, "status", addr+","+closedAddr(t), "--timeout", "2s")
	if code != cli.ExitOK || !strings.Contains(out, "unreachable") {
		t.Fatalf("status with a dead node: exit %d\n%s", code, out)
	}

	// group delete removes a group's committed offsets.
	cliOpts, err := d.DialOptions(devcluster.CLIToken)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Config{Addrs: d.StoreAddrs, DialOptions: cliOpts})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Append(ctx, &logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{
		{Group: "billing", Topic: "orders", Offset: 1}, {Group: "billing", Topic: "inventory", Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
	// group delete needs cluster version 2, which a new cluster's leader
	// commits at its first poll of the voters' versions, right after the
	// election: until then it is refused FEATURE_NOT_ENABLED.
	testwait.For(t, 30*time.Second, "group delete past the version gate", func() bool {
		code, out, errOut = runCLI(t, nil, "group", "delete", addr, "--group", "billing")
		return !strings.Contains(errOut, "FEATURE_NOT_ENABLED")
	})
	if code != cli.ExitOK || !strings.Contains(out, "deleted 2 committed offsets of group billing") {
		t.Fatalf("group delete: exit %d, %q, %q", code, out, errOut)
	}
	if got, err := cl.FetchOffsets(ctx, "billing"); err != nil || len(got) != 0 {
		t.Fatalf("offsets after group delete: %v, %v", got, err)
	}

	// Refused by the dev policy: one line naming the identity and why.
	files := d.TLSFiles(devcluster.ConsumerIdentity)
	code, _, errOut = runCLI(t, nil, "append", addr, "--token-file=", "--tls-cert", files.CertFile, "--tls-key", files.KeyFile, "--topic", `orders={"id":9}`)
	wantRuntimeError(t, code, errOut, `append refused: PERMISSION_DENIED: consumer (certificate) refused: no producer grant for topic "orders"`)
	code, _, errOut = runCLI(t, nil, "append", addr, "--token-file=", "--topic", `orders={"id":9}`)
	wantRuntimeError(t, code, errOut, "append refused: UNAUTHENTICATED: anonymous caller refused: no identity")
	code, _, errOut = runCLI(t, nil, "status", addr, "--token-file=", "--tls-ca=")
	wantRuntimeError(t, code, errOut, "logplayer status: TLS required: status failed: the LogStore at ")

	// A registered producer: each run registers the name again (a new
	// epoch, sequence 1), fencing the run before it.
	var epochs []float64
	for i := range 2 {
		code, out, errOut = runCLI(t, nil, "append", addr, "--topic", `audit={"run":`+strconv.Itoa(i)+`}`, "--producer", "cli-registered")
		if code != cli.ExitOK {
			t.Fatalf("append --producer %d: exit %d, %q", i, code, errOut)
		}
		r := jsonLines(t, out)[0]
		if r["producer_id"] == "" || r["sequence"] != 1.0 || r["duplicate"] != nil {
			t.Fatalf("append --producer %d: %v", i, r)
		}
		epochs = append(epochs, r["epoch"].(float64))
	}
	if epochs[1] != epochs[0]+1 {
		t.Fatalf("epochs %v: want the second run one above the first", epochs)
	}
}

func TestUnreachableCluster(t *testing.T) {
	dead := "--addr=" + closedAddr(t)
	for _, args := range [][]string{
		{"append", dead, "--timeout", "1s", "--topic", `orders={"id":1}`},
		{"status", dead, "--timeout", "1s"},
		{"tail", dead, "--timeout", "1s"},
		{"tail", dead, "--timeout", "1s", "--topic", "orders"},
		{"cluster", "transfer", dead, "--timeout", "1s"},
	} {
		code, out, errOut := runCLI(t, nil, args...)
		wantRuntimeError(t, code, errOut, "LogStore")
		if out != "" {
			t.Fatalf("%v printed %q on stdout", args, out)
		}
		if !bytes.Contains([]byte(errOut), []byte(dead[len("--addr="):])) {
			t.Fatalf("%v: error does not name the address: %q", args, errOut)
		}
	}
}

func TestClusterMembership(t *testing.T) {
	// The fourth node serves plaintext Raft: this cluster runs --insecure.
	d := startTestDevWith(t, &devCmd{portBase: portBaseValue{port: 0, set: true}, dataDir: t.TempDir(), insecure: true})
	addr := "--addr=" + strings.Join(d.StoreAddrs, ",")
	leader := func() string {
		code, out, errOut := runCLI(t, nil, "status", addr, "--json")
		var st clireport.Status
		if err := json.Unmarshal([]byte(out), &st); code != cli.ExitOK || err != nil {
			t.Fatalf("status: exit %d, %q, %v", code, errOut, err)
		}
		return st.Leader
	}

	// A fourth node, started without peers, joins with cluster add.
	raftLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n4st, err := serve.StartStore(logstore.Config{
		ID: "n4", Dir: t.TempDir(), RaftListener: raftLis, APIAddr: apiLis.Addr().String(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, apiLis, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n4st.Close()
	n4 := n4st.Node
	code, out, errOut := runCLI(t, nil, "cluster", "add", addr, "--id", "n4", "--raft-addr", n4.RaftAddr(), "--api-addr", n4.APIAddr())
	if code != cli.ExitOK || !strings.Contains(out, "added voter n4") {
		t.Fatalf("cluster add: exit %d, %q, %q", code, out, errOut)
	}
	// n4 learns the configuration from the leader.
	testwait.For(t, 30*time.Second, "n4 to see four voters", func() bool {
		code, out, _ := runCLI(t, nil, "status", "--addr="+n4.APIAddr(), "--json")
		return code == cli.ExitOK && strings.Count(out, `"voter":true`) == 4
	})

	// Leadership moves to the node named.
	target := "n3"
	if leader() == "n3" {
		target = "n2"
	}
	code, out, errOut = runCLI(t, nil, "cluster", "transfer", addr, "--id", target)
	if code != cli.ExitOK || !strings.Contains(out, "transferred to "+target) {
		t.Fatalf("cluster transfer: exit %d, %q, %q", code, out, errOut)
	}
	testwait.For(t, 30*time.Second, "leadership on "+target, func() bool { return leader() == target })

	// Unknown ids: one line, exit 1, nothing changes.
	code, _, errOut = runCLI(t, nil, "cluster", "remove", addr, "--id", "nosuch")
	wantRuntimeError(t, code, errOut, `no server "nosuch"`)
	code, _, errOut = runCLI(t, nil, "cluster", "transfer", addr, "--id", "nosuch")
	wantRuntimeError(t, code, errOut, "MEMBERSHIP")

	code, out, errOut = runCLI(t, nil, "cluster", "remove", addr, "--id", "n4")
	if code != cli.ExitOK || !strings.Contains(out, "removed n4") {
		t.Fatalf("cluster remove: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, nil, "status", addr, "--json")
	if code != cli.ExitOK || strings.Count(out, `"voter":true`) != 3 || strings.Contains(out, `"n4"`) {
		t.Fatalf("status after remove: exit %d: %s", code, out)
	}
}
