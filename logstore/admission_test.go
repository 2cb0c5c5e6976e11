package logstore_test

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// wantDuplicateAt fails unless resp, err is the duplicate answer of a
// request first committed at lsn.
func wantDuplicateAt(t *testing.T, what string, resp *logstorepb.AppendResponse, err error, lsn uint64) {
	t.Helper()
	if err != nil || !resp.GetDuplicate() || resp.GetLsn() != lsn {
		t.Fatalf("%s: %v %v (code %v), want the first result (lsn %d) as a duplicate", what, resp, err, apierr.CodeOf(err), lsn)
	}
}

// TestRetryAnsweredBeforeValidation is defect 1 of issue #26 at the edge:
// a registered producer's sequence 1 commits and its answer is lost; then
// its topic is declared kv, and the leader restarts with a message limit
// below the message's size. The retry (the same request, by Append and in
// an AppendBatch) gets the first result as a duplicate each time, not
// SCHEMA_MISMATCH or MESSAGE_TOO_LARGE; a new sequence with the same
// content is refused by both checks as before.
func TestRetryAnsweredBeforeValidation(t *testing.T) {
	c := startCluster(t, 1, nil)
	waitClusterVersion(t, c, fsm.CurrentVersion)
	ctx := ctxT(t, 90*time.Second)
	ls := rawConn(t, c.Nodes[0].APIAddr())
	p, err := ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 2048) // neither a mutation nor within a 1 KiB limit
	req := func(seq uint64) *logstorepb.AppendRequest {
		return &logstorepb.AppendRequest{ProducerId: p.ProducerId, ProducerEpoch: p.Epoch, Sequence: seq,
			Slices: []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{{Value: big}}}}}
	}
	first, err := ls.Append(ctx, req(1))
	if err != nil {
		t.Fatal(err)
	}
	retry := func(what string, ls logstorepb.LogStoreClient) {
		t.Helper()
		resp, err := ls.Append(ctx, req(1))
		wantDuplicateAt(t, what+": Append", resp, err, first.Lsn)
		br, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{req(1)}})
		if err != nil {
			t.Fatalf("%s: AppendBatch: %v", what, err)
		}
		if e := br.Results[0].GetError(); e != nil {
			err = apierr.Decode(e)
		}
		wantDuplicateAt(t, what+": AppendBatch", br.Results[0].GetResponse(), err, first.Lsn)
	}

	if _, err := ls.CreateTopic(ctx, kvDecl("t", "")); err != nil {
		t.Fatal(err)
	}
	retry("after the schema change", ls)
	if _, err := ls.Append(ctx, req(2)); apierr.CodeOf(err) != logstorepb.ErrorCode_SCHEMA_MISMATCH {
		t.Fatalf("new sequence after the schema change: %v, want SCHEMA_MISMATCH", err)
	}

	c.stop(0)
	c.cfgs[0].MaxMessageBytes = 1024
	c.restart(0)
	c.waitLeader()
	ls = rawConn(t, c.Nodes[0].APIAddr())
	retry("after the restart with a smaller message limit", ls)
	if _, err := ls.Append(ctx, req(2)); apierr.CodeOf(err) != logstorepb.ErrorCode_MESSAGE_TOO_LARGE {
		t.Fatalf("new sequence above the message limit: %v, want MESSAGE_TOO_LARGE", err)
	}
}

// TestLegacyProducerRefusedAtTheEdge is defect 7 of issue #26 through the
// API: by default an Append with a producer_id and no producer_epoch is
// FAILED_PRECONDITION / LEGACY_PRODUCER_REFUSED and writes nothing; a store
// started with AllowLegacyProducers takes it (and answers its retry as a
// duplicate).
func TestLegacyProducerRefusedAtTheEdge(t *testing.T) {
	legacy := func() *logstorepb.AppendRequest {
		req := txnReq("l", "t")
		req.ProducerId, req.Sequence = "legacy", 1
		return req
	}
	c := startCluster(t, 1, nil)
	waitClusterVersion(t, c, fsm.CurrentVersion)
	ctx := ctxT(t, 60*time.Second)
	ls := rawConn(t, c.Nodes[0].APIAddr())
	_, err := ls.Append(ctx, legacy())
	if status.Code(err) != codes.FailedPrecondition || apierr.CodeOf(err) != logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED {
		t.Fatalf("legacy producer by default: %v, want FAILED_PRECONDITION / LEGACY_PRODUCER_REFUSED", err)
	}
	br, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{legacy()}})
	if err != nil || apierr.CodeOf(apierr.Decode(br.Results[0].GetError())) != logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED {
		t.Fatalf("legacy producer in an AppendBatch: %v %v", br, err)
	}
	if h := c.Nodes[0].HeadLSN(); h != 0 {
		t.Fatalf("refused appends wrote up to lsn %d", h)
	}

	c = startCluster(t, 1, func(cfg *logstore.Config) { cfg.AllowLegacyProducers = true })
	waitClusterVersion(t, c, fsm.CurrentVersion)
	ls = rawConn(t, c.Nodes[0].APIAddr())
	first, err := ls.Append(ctx, legacy())
	if err != nil {
		t.Fatalf("legacy producer with AllowLegacyProducers: %v", err)
	}
	resp, err := ls.Append(ctx, legacy())
	wantDuplicateAt(t, "legacy retry", resp, err, first.Lsn)
}
