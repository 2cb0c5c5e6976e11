package logstore_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// waitLogIdentity waits until the leader reports a complete log identity
// other than not, and returns it.
func waitLogIdentity(t *testing.T, addrs []string, not string) (clusterID, incarnation string, epoch types.Epoch) {
	t.Helper()
	cl := newClient(t, addrs...)
	testwait.ForErr(t, testwait.Max, "the log identity", func() error {
		st, err := cl.LeaderStatus(ctxT(t, 5*time.Second))
		if err != nil {
			return err
		}
		if st.LogClusterId == "" || st.LogIncarnation == "" || st.LogIncarnation == not {
			return fmt.Errorf("identity %q/%q (version %d)", st.LogClusterId, st.LogIncarnation, st.ClusterVersion)
		}
		clusterID, incarnation, epoch = st.LogClusterId, st.LogIncarnation, types.Epoch(st.Epoch)
		return nil
	})
	return clusterID, incarnation, epoch
}

// A cluster gets a log identity; a backup restored into a new cluster keeps
// its cluster id, gets a new incarnation, and issues epochs above every one
// issued before (the epoch counter jumps by fsm.EpochSafetyMargin), even
// those issued after the backup.
func TestRestoreStartsNewIncarnation(t *testing.T) {
	src := startCluster(t, 1, nil)
	cl := newClient(t, src.addrs()...)
	ctx := ctxT(t, 60*time.Second)
	cluster, inc, _ := waitLogIdentity(t, src.addrs(), "")
	if _, err := cl.Append(ctx, txnReq("x", "a")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "backup.lpb")
	saveBackup(t, src.addrs(), path)
	var last types.Epoch
	for range 3 { // issued after the backup: the restored log does not hold them
		e, err := cl.NextEpoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last = e
	}

	dst := startCluster(t, 1, func(cfg *logstore.Config) {
		if _, err := logstore.RestoreBackup(path, cfg.Dir, cfg.Bootstrap); err != nil {
			t.Fatal(err)
		}
	})
	c2, inc2, _ := waitLogIdentity(t, dst.addrs(), inc)
	if c2 != cluster || inc2 == inc {
		t.Fatalf("restored identity %s/%s, want cluster %s and an incarnation other than %s", c2, inc2, cluster, inc)
	}
	e, err := newClient(t, dst.addrs()...).NextEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e <= last || e < fsm.EpochSafetyMargin {
		t.Fatalf("restored cluster issued epoch %d, not above %d issued before (margin %d)", e, last, fsm.EpochSafetyMargin)
	}
}

// A quorum recovery (Config.Recover) starts a new incarnation too, and
// raises the epoch counter.
func TestRecoverStartsNewIncarnation(t *testing.T) {
	c := startCluster(t, 1, nil)
	cluster, inc, epoch := waitLogIdentity(t, c.addrs(), "")
	c.stop(0)
	c.Configs[0].Recover = true
	c.restart(0)
	c2, inc2, epoch2 := waitLogIdentity(t, c.addrs(), inc)
	if c2 != cluster || inc2 == inc || epoch2 < epoch+fsm.EpochSafetyMargin {
		t.Fatalf("recovered identity %s/%s epoch %d, want cluster %s, a new incarnation, epoch >= %d",
			c2, inc2, epoch2, cluster, epoch+fsm.EpochSafetyMargin)
	}
	if _, err := newClient(t, c.addrs()...).Append(ctxT(t, 60*time.Second), &logstorepb.AppendRequest{
		Slices: []*logstorepb.Slice{{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte("x")}}}}}); err != nil {
		t.Fatal(err)
	}
}
