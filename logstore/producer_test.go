package logstore_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testmetric"
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
		cfg.AllowLegacyProducers = true
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

// TestProducerMetrics: logstore_registered_producers follows the table's
// rows, and logstore_producer_refusals_total counts each refusal the
// leader answered, by code, through Append and AppendBatch alike.
func TestProducerMetrics(t *testing.T) {
	c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.MaxProducers = 2 })
	waitClusterVersion(t, c, fsm.CurrentVersion)
	n := c.Nodes[0]
	ls := rawConn(t, n.APIAddr())
	ctx := ctxT(t, 60*time.Second)
	node := func(code string) map[string]string { // one node: no need to match its label
		if code == "" {
			return nil
		}
		return map[string]string{"code": code}
	}
	const refusals = "logstore_producer_refusals_total"
	codes := []string{"unknown_producer", "producer_fenced", "table_full", "sequence_too_old", "sequence_reused", "legacy_producer_refused"}
	for _, code := range codes {
		if v := testmetric.Value(t, n.Registry(), refusals, node(code)); v != 0 {
			t.Fatalf("%s at start: %v", code, v)
		}
	}
	p, err := ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	z, err := ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "z"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "z"}); err != nil { // fences z's epoch 1
		t.Fatal(err)
	}
	if v := testmetric.Value(t, n.Registry(), "logstore_registered_producers", node("")); v != 2 {
		t.Fatalf("registered producers %v, want 2", v)
	}
	if _, err := ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "third"}); apierr.CodeOf(err) != logstorepb.ErrorCode_TABLE_FULL {
		t.Fatalf("third producer in a table of 2: %v", err)
	}
	reg := func(id string, epoch, seq uint64, value string) *logstorepb.AppendRequest {
		return &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "a", Messages: []*logstorepb.Message{{Value: []byte(value)}}}},
			ProducerId: id, ProducerEpoch: epoch, Sequence: seq}
	}
	for seq := uint64(1); seq <= 6; seq++ {
		if _, err := ls.Append(ctx, reg(p.ProducerId, p.Epoch, seq, "v")); err != nil {
			t.Fatal(err)
		}
	}
	refused := []*logstorepb.AppendRequest{
		reg("99", 1, 1, "v"),                        // unknown_producer
		reg(z.ProducerId, z.Epoch, 1, "v"),          // producer_fenced
		reg(p.ProducerId, p.Epoch, 1, "v"),          // sequence_too_old
		reg(p.ProducerId, p.Epoch, 6, "other"),      // sequence_reused
		reg(p.ProducerId, p.Epoch, 6, "v"),          // a duplicate: not a refusal
		reg("legacy", 0, 1, "v"),                    // legacy_producer_refused
		{Slices: []*logstorepb.Slice{{Topic: "a"}}}, // invalid: not a producer refusal
	}
	for _, r := range refused {
		ls.Append(ctx, r) //nolint:errcheck // the codes are checked through the metric
	}
	if _, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: refused}); err != nil {
		t.Fatal(err)
	}
	for _, code := range codes {
		want := 2.0 // once through Append, once in the batch
		if code == "table_full" {
			want = 1
		}
		if v := testmetric.Value(t, n.Registry(), refusals, node(code)); v != want {
			t.Errorf("%s: %v, want %v", code, v, want)
		}
	}
}
