package logstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// testCluster is N in-process nodes (logstoretest.Cluster with short
// names); nodes and cfgs share the Cluster's slices.
type testCluster struct {
	*logstoretest.Cluster
	nodes []*logstore.Node
	cfgs  []logstore.Config
}

func quietLogger() *slog.Logger { return logstoretest.QuietLogger() }

func testConfig(id, dir string) logstore.Config { return logstoretest.Config(id, dir) }

// allowLegacyProducers is the tweak of a test that writes with legacy
// (unregistered) producer ids.
func allowLegacyProducers(cfg *logstore.Config) { cfg.AllowLegacyProducers = true }

func listen(t testing.TB) net.Listener { return logstoretest.Listen(t) }

func startCluster(t testing.TB, n int, tweak func(*logstore.Config), opts ...grpc.ServerOption) *testCluster {
	t.Helper()
	lc := logstoretest.Start(t, n, tweak, opts...)
	return &testCluster{Cluster: lc, nodes: lc.Nodes, cfgs: lc.Configs}
}

func (c *testCluster) waitLeader() *logstore.Node { return c.WaitLeader() }
func (c *testCluster) stop(i int)                 { c.Stop(i) }
func (c *testCluster) restart(i int)              { c.Restart(i) }
func (c *testCluster) addrs() []string            { return c.Addrs() }

func newClient(t testing.TB, addrs ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Addrs: addrs, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// txnReq builds a txn writing id to each topic.
func txnReq(id string, topics ...string) *logstorepb.AppendRequest {
	req := &logstorepb.AppendRequest{}
	for _, tp := range topics {
		req.Slices = append(req.Slices, &logstorepb.Slice{Topic: tp, Messages: []*logstorepb.Message{{Value: []byte(id), Key: []byte(tp)}}})
	}
	return req
}

// readAll reads [1, to] from the node at addr.
func readAll(t testing.TB, addr string, to uint64) []*logstorepb.Transaction {
	t.Helper()
	cl := newClient(t, addr)
	var out []*logstorepb.Transaction
	err := cl.Read(ctxT(t, 60*time.Second), &logstorepb.ReadRequest{FromLsn: 1, ToLsn: to}, func(r *logstorepb.ReadResponse) error {
		out = append(out, r.Transactions...)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", addr, err)
	}
	return out
}

type ack struct {
	id   string
	req  *logstorepb.AppendRequest
	resp *logstorepb.AppendResponse
}

// checkLog checks a node's txns: dense LSNs, dense per-topic offsets, and
// every ack at its LSN with its offsets and content.
func checkLog(t testing.TB, txns []*logstorepb.Transaction, acks []ack) {
	t.Helper()
	next := map[string]uint64{}
	for i, txn := range txns {
		if txn.Lsn != uint64(i+1) {
			t.Fatalf("txn %d has lsn %d", i, txn.Lsn)
		}
		for _, s := range txn.Slices {
			if s.FirstOffset != next[s.Topic] {
				t.Fatalf("lsn %d topic %s first offset %d, want %d", txn.Lsn, s.Topic, s.FirstOffset, next[s.Topic])
			}
			next[s.Topic] += uint64(len(s.Messages))
		}
	}
	for _, a := range acks {
		if a.resp.Lsn == 0 || a.resp.Lsn > uint64(len(txns)) {
			t.Fatalf("ack %s lsn %d beyond log of %d", a.id, a.resp.Lsn, len(txns))
		}
		txn := txns[a.resp.Lsn-1]
		if len(txn.Slices) != len(a.req.Slices) {
			t.Fatalf("ack %s: lsn %d has %d slices, want %d", a.id, a.resp.Lsn, len(txn.Slices), len(a.req.Slices))
		}
		for j, s := range txn.Slices {
			if s.Topic != a.req.Slices[j].Topic || s.FirstOffset != a.resp.Slices[j].FirstOffset ||
				string(s.Messages[0].Value) != a.id {
				t.Fatalf("ack %s: lsn %d slice %d = %s@%d %q, want %s@%d", a.id, a.resp.Lsn, j, s.Topic, s.FirstOffset,
					s.Messages[0].Value, a.req.Slices[j].Topic, a.resp.Slices[j].FirstOffset)
			}
		}
	}
}

// segmentFiles returns name -> bytes of a node's segment directory.
func segmentFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(filepath.Join(dir, "segments"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, "segments", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// appendLoad runs workers goroutines doing perWorker multi-topic Appends.
func appendLoad(t testing.TB, cl *client.Client, workers, perWorker int, prefix string) []ack {
	var mu sync.Mutex
	var acks []ack
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				id := fmt.Sprintf("%s-w%d-%d", prefix, w, i)
				req := txnReq(id, fmt.Sprintf("t%d", w%4), fmt.Sprintf("u%d", (w+i)%3), "all")
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				resp, err := cl.Append(ctx, req)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("append %s: %w", id, err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{id, req, resp})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return acks
}

func maxLSN(acks []ack) uint64 {
	var m uint64
	for _, a := range acks {
		m = max(m, a.resp.Lsn)
	}
	return m
}

func TestClusterConcurrentAppendsIdenticalReplicas(t *testing.T) {
	c := startCluster(t, 3, func(cfg *logstore.Config) { cfg.SegmentBytes = 16 << 10 })
	cl := newClient(t, c.addrs()...)
	acks := appendLoad(t, cl, 16, 40, "x")
	top := maxLSN(acks)
	if top < uint64(len(acks)) {
		t.Fatalf("max lsn %d below %d acks", top, len(acks))
	}
	for _, n := range c.Nodes {
		testwait.For(t, 60*time.Second, "replicas catch up", func() bool { return uint64(n.HeadLSN()) >= top })
	}
	for i, n := range c.Nodes {
		txns := readAll(t, n.APIAddr(), top)
		if len(txns) != int(top) {
			t.Fatalf("node %d: %d txns, want %d", i, len(txns), top)
		}
		checkLog(t, txns, acks)
	}
	// Byte-identical segment logs.
	var files []map[string][]byte
	for i, n := range c.Nodes {
		if err := n.SegmentLog().Sync(); err != nil {
			t.Fatal(err)
		}
		files = append(files, segmentFiles(t, c.Configs[i].Dir))
	}
	var names []string
	for name := range files[0] {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) < 3 {
		t.Fatalf("expected several segment files (SegmentBytes 16 KiB), got %v", names)
	}
	for i := 1; i < len(files); i++ {
		if len(files[i]) != len(files[0]) {
			t.Fatalf("node %d has %d segment files, node 0 %d", i, len(files[i]), len(files[0]))
		}
		for _, name := range names {
			if !bytes.Equal(files[i][name], files[0][name]) {
				t.Fatalf("segment file %s differs between node 0 and node %d", name, i)
			}
		}
	}
}
