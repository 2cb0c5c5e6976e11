package logstore_test

import (
	"context"
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

// One voter advertises version 2 (the release before registered
// producers): InitProducer and an Append using producer_epoch are refused
// with FEATURE_NOT_ENABLED and write nothing, a legacy producer Append
// still works; once the voter is upgraded both are accepted, and a
// malformed registered id is INVALID_ARGUMENT.
func TestVersionGateHoldsRegisteredProducers(t *testing.T) {
	c := startCluster(t, 3, func(cfg *logstore.Config) {
		if cfg.ID == "n2" {
			cfg.AdvertisedVersion = 2
		}
	})
	c.waitLeader()
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 90*time.Second)
	testwait.For(t, 30*time.Second, "cluster version 2", func() bool {
		return c.waitLeader().PolledVersion() == 2 && c.waitLeader().ClusterVersion() == 2
	})
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, _, err := cl.InitProducer(short, "p")
	cancel()
	if status.Code(err) != codes.FailedPrecondition || apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED || apierr.Detail(err).Limit != 3 {
		t.Fatalf("InitProducer at version 2: %v, want FEATURE_NOT_ENABLED (limit 3)", err)
	}
	reg := txnReq("r", "t", "x")
	reg.ProducerId, reg.ProducerEpoch, reg.Sequence = "1", 1, 1
	if _, err := cl.Append(ctx, reg); apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("registered Append at version 2: %v, want FEATURE_NOT_ENABLED", err)
	}
	legacy := txnReq("l", "t", "x")
	legacy.ProducerId, legacy.Sequence = "legacy", 1
	resp, err := cl.Append(ctx, legacy)
	if err != nil || resp.Lsn != 1 {
		t.Fatalf("legacy producer Append at version 2: %v %v, want lsn 1 (nothing else written)", resp, err)
	}

	c.stop(2)
	c.cfgs[2].AdvertisedVersion = 0
	c.restart(2)
	waitClusterVersion(t, c, fsm.CurrentVersion)
	id, epoch, err := cl.InitProducer(ctx, "p")
	if err != nil || id != "1" || epoch != 1 {
		t.Fatalf("InitProducer after the upgrade: %q %d %v", id, epoch, err)
	}
	reg.ProducerId, reg.ProducerEpoch = id, epoch
	if resp, err := cl.Append(ctx, reg); err != nil || resp.Lsn != 2 {
		t.Fatalf("registered Append after the upgrade: %v %v", resp, err)
	}
	bad := txnReq("b", "t", "x")
	bad.ProducerId, bad.ProducerEpoch, bad.Sequence = "01", 1, 1
	if _, err := cl.Append(ctx, bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("registered Append with a malformed id: %v, want INVALID_ARGUMENT", err)
	}
}
