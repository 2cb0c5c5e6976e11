package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/keepalive"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
)

// family is what the test knows of one exported metric family.
type family struct {
	typ    dto.MetricType
	labels map[string]bool // every label name seen on a series of it
}

// catalog maps an exported family name to what it carries.
type catalog map[string]family

// process is one role's registry: what its /metrics would serve.
type process struct {
	role string
	reg  *prometheus.Registry
}

// trafficTxns is how many transactions the test appends: enough for every
// histogram and per-target series to exist, few enough to stay quick.
const trafficTxns = 40

// exportTimeout bounds each wait of startProcesses.
const exportTimeout = 60 * time.Second

// startProcesses runs the three roles in this process, as the binary wires
// them (one registry per role): a single-node LogStore, a shard serving
// target "s1", and a LogPlayer delivering topic "s1" to that shard and to a
// target "misnamed" whose address is the same shard (which refuses it:
// WRONG_TARGET, so the refusal and blocked series exist too). It appends
// trafficTxns transactions and waits until s1 acked all of them and the
// misnamed target is blocked.
func startProcesses(t *testing.T) []process {
	t.Helper()
	storeReg, playerReg, shardReg := prometheus.NewRegistry(), prometheus.NewRegistry(), prometheus.NewRegistry()
	// Each role's registry also has the Go runtime and process collectors,
	// as cmd/logplayer's processRegistry gives every role.
	for _, reg := range []*prometheus.Registry{storeReg, playerReg, shardReg} {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	ls := logstoretest.Start(t, 1, func(c *logstore.Config) { c.Registry = storeReg })
	ctx, cancel := context.WithCancel(context.Background())
	// One cleanup stops everything in order: cancel, wait for the Run and
	// Serve goroutines, then close what they used (last opened first).
	var done []chan error
	var closers []func()
	t.Cleanup(func() {
		cancel()
		for _, ch := range done {
			if err := <-ch; err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
		for _, c := range slices.Backward(closers) {
			c()
		}
	})
	run := func(f func() error) {
		ch := make(chan error, 1) // written once by the goroutine
		done = append(done, ch)
		go func() { ch <- f() }()
	}

	sh, err := shard.Open(shard.Config{
		Dir: t.TempDir(), ID: "s1", Topics: []string{"s1"},
		Logger: logstoretest.QuietLogger(), Registerer: shardReg,
	})
	if err != nil {
		t.Fatal(err)
	}
	closers = append(closers, func() { _ = sh.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run(func() error { return sh.Serve(ctx, lis) })

	p, err := logplayer.New(logplayer.Config{
		PlayerID: "deploy-test",
		LogStore: ls.Addrs(),
		Targets: []logplayer.TargetConfig{
			{ID: "s1", Address: lis.Addr().String(), Topics: []string{"s1"}},
			{ID: "misnamed", Address: lis.Addr().String(), Topics: []string{"s1"}},
		},
		HandshakeTimeout: 2 * time.Second,
		ReportInterval:   100 * time.Millisecond,
		Keepalive:        keepalive.ClientParameters{Time: -1},
		Logger:           logstoretest.QuietLogger(),
		Registerer:       playerReg,
	})
	if err != nil {
		t.Fatal(err)
	}
	closers = append(closers, p.Close)
	run(func() error { return p.Run(ctx) })

	cl, err := client.New(client.Config{Addrs: ls.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	closers = append(closers, func() { _ = cl.Close() })
	appended := make(chan error, trafficTxns) // one result per append
	for i := range trafficTxns {
		go func() {
			actx, acancel := context.WithTimeout(ctx, exportTimeout)
			defer acancel()
			_, err := cl.Append(actx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{
				Topic: "s1", Messages: []*logstorepb.Message{{Value: shard.EncodePut(fmt.Appendf(nil, "k%d", i), []byte("v"))}},
			}}})
			appended <- err
		}()
	}
	var errs []error
	for range trafficTxns {
		errs = append(errs, <-appended)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, exportTimeout, "s1 acks every append and misnamed is blocked", func() bool {
		var acked, blocked bool
		for _, s := range p.Targets() {
			acked = acked || (s.ID == "s1" && s.LastAck >= trafficTxns)
			blocked = blocked || (s.ID == "misnamed" && s.Blocked)
		}
		return acked && blocked
	})
	return []process{{"logstore", storeReg}, {"logplayer", playerReg}, {"shard", shardReg}}
}

// gather collects every family the processes export, failing t when two
// roles export one name with different types.
func gather(t *testing.T, procs []process) (catalog, []*dto.MetricFamily) {
	t.Helper()
	cat := catalog{}
	var all []*dto.MetricFamily
	for _, p := range procs {
		mfs, err := p.reg.Gather()
		if err != nil {
			t.Fatalf("%s: gather: %v", p.role, err)
		}
		all = append(all, mfs...)
		for _, mf := range mfs {
			f, seen := cat[mf.GetName()]
			if seen && f.typ != mf.GetType() {
				t.Fatalf("%s is a %v in one role and a %v in %s", mf.GetName(), f.typ, mf.GetType(), p.role)
			}
			if !seen {
				f = family{typ: mf.GetType(), labels: map[string]bool{}}
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					f.labels[l.GetName()] = true
				}
			}
			cat[mf.GetName()] = f
		}
	}
	return cat, all
}

// names lists the catalog's families, sorted (for failure messages).
func (c catalog) names() []string {
	var out []string
	for n := range c {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
