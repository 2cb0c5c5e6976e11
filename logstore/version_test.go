package logstore_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// waitClusterVersion waits until every running node has applied v.
func waitClusterVersion(t *testing.T, c *testCluster, v uint32) {
	t.Helper()
	testwait.For(t, 30*time.Second, "cluster version", func() bool {
		for _, n := range c.nodes {
			if n != nil && n.ClusterVersion() != v {
				return false
			}
		}
		return true
	})
}

// One voter advertises the base version (an old release): DeleteGroup is
// refused with FEATURE_NOT_ENABLED and writes nothing; once that voter is
// restarted with the current version the leader raises the cluster
// version and DeleteGroup is accepted.
func TestVersionGateHoldsDeleteGroupUntilEveryVoterUpgraded(t *testing.T) {
	c := startCluster(t, 3, func(cfg *logstore.Config) {
		if cfg.ID == "n2" {
			cfg.AdvertisedVersion = fsm.BaseVersion
		}
	})
	c.waitLeader()
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.Append(ctx, &logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g", Topic: "t", Offset: 4}}}); err != nil {
		t.Fatal(err)
	}
	// The leader has asked every server (the old voter answered 1): the
	// version must stay at the base.
	testwait.For(t, 30*time.Second, "a complete version poll", func() bool {
		return c.waitLeader().PolledVersion() == fsm.BaseVersion
	})
	_, err := cl.DeleteGroup(ctx, "g")
	if status.Code(err) != codes.FailedPrecondition || apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("DeleteGroup with an old voter: %v, want FEATURE_NOT_ENABLED", err)
	}
	if got, err := cl.FetchOffsets(ctx, "g"); err != nil || len(got) != 1 {
		t.Fatalf("offsets after the refused delete: %v %v", got, err)
	}
	for _, n := range c.nodes {
		if v := n.ClusterVersion(); v != fsm.BaseVersion {
			t.Fatalf("%s at cluster version %d with an old voter", n.ID(), v)
		}
	}

	c.stop(2)
	c.cfgs[2].AdvertisedVersion = 0
	c.restart(2)
	waitClusterVersion(t, c, fsm.CurrentVersion)
	if n, err := cl.DeleteGroup(ctx, "g"); err != nil || n != 1 {
		t.Fatalf("DeleteGroup after the upgrade: %d, %v", n, err)
	}
}
