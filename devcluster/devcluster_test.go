package devcluster_test

import (
	"context"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/logplayer/logplayer/devcluster"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/types"
)

// TestStartDeliversAndStopReleases: a dev cluster on random ports delivers
// an append to its shard and to nobody else; Stop closes every socket
// (the store addresses can be bound again) and removes its temporary
// directory.
func TestStartDeliversAndStopReleases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Config{Logger: logstoretest.QuietLogger(), Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if len(c.StoreAddrs) != devcluster.Stores || len(c.Targets) != devcluster.Shards+1 || c.MetricsAddr() == "" || !c.RemoveDir {
		t.Fatalf("stores %v, %d targets, metrics %q, remove dir %v", c.StoreAddrs, len(c.Targets), c.MetricsAddr(), c.RemoveDir)
	}
	resp, err := c.Client.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: "shard-1", Messages: []*logstorepb.Message{{Key: []byte("k"), Value: shard.EncodePut([]byte("k"), []byte("v"))}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "shard-1 acks the append", func() bool {
		for _, ts := range c.Player.Targets() {
			if ts.ID == "shard-1" && ts.LastAck >= types.LSN(resp.Lsn) {
				return true
			}
		}
		return false
	})
	for _, ts := range c.Player.Targets() {
		if !slices.Equal(ts.Topics, c.Targets[slices.IndexFunc(c.Targets, func(t *devcluster.Target) bool { return t.ID == ts.ID })].Topics) {
			t.Fatalf("player's subscription of %s %v differs from the cluster's", ts.ID, ts.Topics)
		}
	}
	if p := c.Recorder.Progress(); p["shard-1"].Messages != 1 || p["shard-0"].Messages != 0 || p[devcluster.EventsTarget].Messages != 0 {
		t.Fatalf("applied messages %+v: want 1 on shard-1 only", p)
	}
	dir, stores := c.Dir, c.StoreAddrs
	c.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temporary dir %s after Stop: %v", dir, err)
	}
	for _, a := range append(stores, c.Targets[0].Addr(), c.AdminAddr()) {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s still bound after Stop: %v", a, err)
		}
		l.Close()
	}
}

// TestRestartOnDirReusesStoreAddrs: a kept data directory restarts its
// LogStore nodes on the addresses its Raft configuration names, and the
// log survives.
func TestRestartOnDirReusesStoreAddrs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	cfg := devcluster.Config{Dir: dir, Logger: logstoretest.QuietLogger()}
	c, err := devcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Client.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: "orders", Messages: []*logstorepb.Message{{Value: []byte("{}")}}},
	}})
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	first := slices.Clone(c.StoreAddrs)
	c.Stop()
	if c.RemoveDir {
		t.Fatal("a given directory must be kept")
	}
	c, err = devcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if !slices.Equal(c.StoreAddrs, first) {
		t.Fatalf("stores moved from %v to %v", first, c.StoreAddrs)
	}
	st, err := c.Client.LeaderStatus(ctx)
	if err != nil || st.HeadLsn < resp.Lsn {
		t.Fatalf("after restart: %v, %v; want head >= %d", st, err, resp.Lsn)
	}
}
