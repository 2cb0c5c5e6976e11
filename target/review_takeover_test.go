package target_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// A newer stream of the same epoch takes over while the applier is inside
// Store.Apply for the old stream, with more of the old stream's batches
// queued: the HelloAck reports exactly what was durably applied when the
// takeover was handled, nothing of the old stream is applied after it, and
// the new stream resumes at HelloAck+1 without a gap or a duplicate.
func TestReviewTakeoverWhileApplying(t *testing.T) {
	entered := make(chan struct{}, 1) // Apply of LSN 1 started
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	store := &targettest.MemStore{}
	store.BeforeApply = func(ds []*targetpb.Delivery, _ target.State) error {
		if len(ds) > 0 && ds[0].Lsn == 1 {
			entered <- struct{}{}
			<-release
		}
		return nil
	}
	e := newEnv(t, store, nil)
	old, _ := e.open(1, 1)
	del := func(lsn uint64, topic string) *targetpb.Delivery {
		return &targetpb.Delivery{Lsn: lsn, Slices: []*logstorepb.TxnSlice{
			{Topic: topic, Messages: []*logstorepb.Message{{Value: []byte(topic)}}}}}
	}
	if err := old.Send(del(1, "old-1")); err != nil {
		t.Fatal(err)
	}
	<-entered // the applier is inside Apply(1)
	for lsn := uint64(2); lsn <= 4; lsn++ {
		if err := old.Send(del(lsn, fmt.Sprint("old-", lsn))); err != nil {
			t.Fatal(err)
		}
	}

	type opened struct {
		s   *targettest.Sender
		ack *targetpb.HelloAck
		err error
	}
	got := make(chan opened, 1)
	go func() {
		s, ack, err := targettest.Open(context.Background(), e.cc, targettest.Hello("t1", 1, 2))
		got <- opened{s, ack, err}
	}()
	once.Do(func() { close(release) })
	o := <-got
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Cleanup(o.s.Close)
	wantRefusal(t, old.Wait(ctxT(t)), codes.Aborted, logstorepb.ErrorCode_SUPERSEDED)

	x := o.ack.AppliedLsn
	if x < 1 || x > 4 {
		t.Fatalf("HelloAck applied %d: want 1..4 (LSN 1 was being applied, 2..4 queued before or after the Hello)", x)
	}
	if err := o.s.Send(del(x+1, "new")); err != nil {
		t.Fatal(err)
	}
	if err := o.s.WaitAck(ctxT(t), types.LSN(x+1)); err != nil {
		t.Fatal(err)
	}
	lsns := appliedLSNs(store)
	for i, lsn := range lsns {
		if lsn != uint64(i+1) {
			t.Fatalf("applied LSNs %v: want 1..%d densely, each once", lsns, x+1)
		}
	}
	if len(lsns) != int(x+1) {
		t.Fatalf("applied LSNs %v: want 1..%d (nothing of the old stream after HelloAck %d)", lsns, x+1, x)
	}
	if last := store.Applied()[x]; last.Slices[0].Topic != "new" {
		t.Fatalf("LSN %d applied from topic %q, want the new stream's", x+1, last.Slices[0].Topic)
	}
}
