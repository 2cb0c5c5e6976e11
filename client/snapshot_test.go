package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestProducerStateSurvivesSnapshotRestart complements logstore's
// TestSnapshotRestartAndJoin (retry of the last sequence and offsets after
// a full restart and on a new voter) from the SDK's side: a transaction
// left in doubt before a snapshot is resolved after the node restarted
// from it (plus replayed entries), the producer and a replayed producer go
// on with their next sequences, and the committed offset still guards
// ExpectCommitted.
func TestProducerStateSurvivesSnapshotRestart(t *testing.T) {
	d := newDropper()
	c := logstoretest.Start(t, 1, nil, grpc.ChainUnaryInterceptor(d.intercept))
	cl := newClient(t, c.Addrs()...)
	ctx := ctxT(t, 60*time.Second)
	p := newProducer(t, cl, client.ProducerConfig{})
	for i := range 20 {
		txn := client.NewTxn().Add("out", []byte(fmt.Sprint(i))).
			CommitOffset("g", "in", uint64(i+1)).ExpectCommitted("g", "in", uint64(i))
		if _, err := p.Append(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	d.set(func(*logstorepb.AppendRequest, int) (bool, bool) { return true, false })
	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err := p.Append(short, client.NewTxn().Add("out", []byte("20")).CommitOffset("g", "in", 21).ExpectCommitted("g", "in", 20))
	cancel()
	if !errors.Is(err, client.ErrInDoubt) {
		t.Fatalf("append with lost responses: %v, want ErrInDoubt", err)
	}
	d.set(nil)
	if err := c.Nodes[0].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	q := newProducer(t, cl, client.ProducerConfig{}) // after the snapshot: replayed at restart
	if _, err := q.AppendAtomic(ctx, map[string][][]byte{"other": {[]byte("q1")}}); err != nil {
		t.Fatal(err)
	}

	c.Stop(0)
	c.Restart(0)

	res, err := p.Resolve(ctx)
	if err != nil || !res.Duplicate || res.Sequence != 21 || res.LSN != 21 {
		t.Fatalf("resolve after restart = %+v, %v; want the first result (sequence 21, lsn 21)", res, err)
	}
	if res, err := q.AppendAtomic(ctx, map[string][][]byte{"other": {[]byte("q2")}}); err != nil || res.Sequence != 2 {
		t.Fatalf("replayed producer's next append = %+v, %v", res, err)
	}
	if off, err := cl.CommittedOffset(ctx, "g", "in"); err != nil || off != 21 {
		t.Fatalf("committed offset after restart %d, %v; want 21", off, err)
	}
	_, err = p.Append(ctx, client.NewTxn().Add("out", []byte("stale")).CommitOffset("g", "in", 21).ExpectCommitted("g", "in", 20))
	var ce *client.ConditionError
	if !errors.As(err, &ce) || ce.Group != "g" || ce.Actual != 21 {
		t.Fatalf("stale commit after restart: %v, want a group condition failure at 21", err)
	}
	if got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "out"); len(got) != 21 || len(got["20"]) != 1 {
		t.Fatalf("out holds %d values (20: %v), want 21, each once", len(got), got["20"])
	}
}
