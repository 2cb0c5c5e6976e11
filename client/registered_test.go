package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func TestMaxInFlightMatchesWindow(t *testing.T) {
	if client.MaxProducerInFlight != fsm.ProducerWindow {
		t.Fatalf("client allows %d in flight, the cluster remembers %d", client.MaxProducerInFlight, fsm.ProducerWindow)
	}
}

// withheld is a server interceptor that, for the Appends hold selects,
// lets the first one commit and loses its answer, then answers every
// retry UNAVAILABLE without running it until release is closed.
type withheld struct {
	hold    func(*logstorepb.AppendRequest) bool
	release chan struct{}
	commits atomic.Int64
}

func (w *withheld) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var reqs []*logstorepb.AppendRequest
	switch r := req.(type) {
	case *logstorepb.AppendRequest:
		reqs = []*logstorepb.AppendRequest{r}
	case *logstorepb.AppendBatchRequest:
		reqs = r.Requests
	}
	held := false
	for _, r := range reqs {
		held = held || (w.hold != nil && w.hold(r))
	}
	if !held {
		return handler(ctx, req)
	}
	select {
	case <-w.release:
		return handler(ctx, req)
	default:
	}
	if w.commits.Add(1) == 1 {
		if _, err := handler(ctx, req); err != nil {
			return nil, err
		}
	}
	return nil, status.Error(codes.Unavailable, "test: answer withheld")
}

// TestUnknownProducerReportsInDoubt: a producer's sequence 2 commits but
// its answer is lost, and its retries do not get through until its row
// expired idle and was reclaimed by another producer. The retry then gets
// UNKNOWN_PRODUCER: Append reports an *InDoubtError with Lost (never a
// success), Resolve returns it once and the producer registers again.
// An idle producer whose row is gone re-registers by itself and writes
// its next transaction once.
func TestUnknownProducerReportsInDoubt(t *testing.T) {
	var victimID atomic.Value
	victimID.Store("")
	w := &withheld{release: make(chan struct{})}
	w.hold = func(r *logstorepb.AppendRequest) bool { return r.ProducerId == victimID.Load() && r.Sequence == 2 }
	c := logstoretest.Start(t, 1, func(cfg *logstore.Config) {
		cfg.MaxProducers = 1
		cfg.ProducerIdleExpiry = time.Second
	}, grpc.ChainUnaryInterceptor(w.intercept))
	cl := newClient(t, c.Addrs()...)
	ctx := ctxT(t, 60*time.Second)
	p := newProducer(t, cl, client.ProducerConfig{ID: "victim", MaxInFlight: 1})
	if _, err := p.Append(ctx, client.NewTxn().Add("t", []byte("v1"))); err != nil {
		t.Fatal(err)
	}
	id, _ := p.RegisteredID()
	victimID.Store(id)

	type outcome struct {
		res *client.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := p.Append(ctx, client.NewTxn().Add("t", []byte("v2")))
		done <- outcome{res, err}
	}()
	testwait.For(t, 30*time.Second, "sequence 2 committed", func() bool { return w.commits.Load() >= 1 })
	// The victim's row is reclaimed once it is idle for the expiry.
	testwait.For(t, 30*time.Second, "another producer registered in the victim's row", func() bool {
		_, _, err := cl.InitProducer(ctx, "other")
		return err == nil
	})
	close(w.release)
	o := <-done
	var ide *client.InDoubtError
	if o.err == nil || !errors.As(o.err, &ide) || !errors.Is(o.err, client.ErrInDoubt) || !ide.Lost || ide.Sequence != 2 || ide.AfterLSN != 1 {
		t.Fatalf("append whose row was reclaimed: %+v, %v; want a Lost *InDoubtError for sequence 2 after lsn 1", o.res, o.err)
	}
	if apierr.CodeOf(o.err) != logstorepb.ErrorCode_UNKNOWN_PRODUCER {
		t.Fatalf("in-doubt error does not carry UNKNOWN_PRODUCER: %v", o.err)
	}
	if _, err := p.Append(ctx, client.NewTxn().Add("t", []byte("blocked"))); !errors.Is(err, client.ErrInDoubt) {
		t.Fatalf("append while a lost transaction is unresolved: %v", err)
	}
	if _, err := p.Resolve(ctx); !errors.As(err, &ide) || !ide.Lost {
		t.Fatalf("resolve of the lost transaction: %v", err)
	}
	if res, err := p.Resolve(ctx); res != nil || err != nil {
		t.Fatalf("second resolve: %v %v", res, err)
	}
	// "other" holds the only row until it is idle for the expiry.
	var res *client.Result
	testwait.For(t, 30*time.Second, "the victim registered again", func() bool {
		var err error
		res, err = p.Append(ctx, client.NewTxn().Add("t", []byte("v3")))
		if err != nil && apierr.CodeOf(err) != logstorepb.ErrorCode_TABLE_FULL {
			t.Fatalf("append after resolve: %v", err)
		}
		return err == nil
	})
	if newID, _ := p.RegisteredID(); newID == id || res.Sequence != 1 {
		t.Fatalf("after re-registration: id %s (was %s), sequence %d", newID, id, res.Sequence)
	}
	// Idle past the expiry, reclaimed by another: the next Append
	// registers again by itself (nothing of it had been sent).
	before, _ := p.RegisteredID()
	testwait.For(t, 30*time.Second, "the victim's row reclaimed", func() bool {
		_, _, err := cl.InitProducer(ctx, "other-2")
		return err == nil
	})
	if res, err := p.Append(ctx, client.NewTxn().Add("t", []byte("v4"))); err == nil {
		if after, _ := p.RegisteredID(); after == before || res.Sequence != 1 || res.Duplicate {
			t.Fatalf("append after the row was reclaimed: %+v under %s (was %s)", res, after, before)
		}
	} else if apierr.CodeOf(err) != logstorepb.ErrorCode_TABLE_FULL { // other-2 holds the only row
		t.Fatalf("append after the row was reclaimed: %v", err)
	}
	got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "t")
	for _, v := range []string{"v1", "v2", "v3"} {
		if len(got[v]) != 1 {
			t.Fatalf("%s in the log %d times (log %v)", v, len(got[v]), got)
		}
	}
	if len(got["blocked"]) != 0 || len(got["v4"]) > 1 {
		t.Fatalf("log %v", got)
	}
}

// TestPipelinedProducerExactlyOnce: 40 concurrent Appends through one
// producer with 5 in flight while the interceptor loses the first answer of
// every third sequence: every transaction is in the log exactly once at
// its result's LSN, and the LSN order is the sequence order.
func TestPipelinedProducerExactlyOnce(t *testing.T) {
	d := newDropper()
	c := lossyCluster(t, 3, d)
	cl := newClient(t, c.Addrs()...)
	ctx := ctxT(t, 120*time.Second)
	p := newProducer(t, cl, client.ProducerConfig{ID: "pipe"})
	d.set(func(req *logstorepb.AppendRequest, seen int) (bool, bool) {
		id, _ := p.RegisteredID()
		return req.ProducerId == id && seen == 0 && req.Sequence%3 == 0, false
	})
	const n = 40
	results := make([]*client.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Append(ctx, client.NewTxn().Add("t", []byte(fmt.Sprintf("m%d", i))))
			if err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if d.lost.Load() == 0 {
		t.Fatal("no answer was lost")
	}
	got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "t")
	bySeq := map[uint64]*client.Result{}
	for i, res := range results {
		if l := got[fmt.Sprintf("m%d", i)]; len(l) != 1 || l[0] != res.LSN {
			t.Fatalf("m%d at lsns %v, result lsn %d", i, l, res.LSN)
		}
		bySeq[res.Sequence] = res
	}
	for seq := uint64(2); seq <= n; seq++ {
		if bySeq[seq] == nil || bySeq[seq-1] == nil || bySeq[seq].LSN <= bySeq[seq-1].LSN {
			t.Fatalf("sequence %d: %v after %v: sequences not dense or not in LSN order", seq, bySeq[seq], bySeq[seq-1])
		}
	}
}

// TestPipelinedInDoubtResolved: five Appends in flight while every answer
// is lost and the callers' deadlines end: each reports ErrInDoubt (one
// refused behind an earlier unsettled sequence too, not written yet: it
// keeps its place; TestGapBehindUnsettledSequence makes that case
// certain); Resolve then settles the in-doubt ones in sequence order, and
// every transaction reported committed is in the log exactly once, at its
// result's LSN, with nothing else written.
func TestPipelinedInDoubtResolved(t *testing.T) {
	d := newDropper()
	c := lossyCluster(t, 1, d)
	cl := newClient(t, c.Addrs()...)
	ctx := ctxT(t, 120*time.Second)
	p := newProducer(t, cl, client.ProducerConfig{ID: "doubtful"})
	if _, err := p.Append(ctx, client.NewTxn().Add("t", []byte("first"))); err != nil {
		t.Fatal(err)
	}
	d.set(func(*logstorepb.AppendRequest, int) (bool, bool) { return true, false })
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Append(short, client.NewTxn().Add("t", []byte(fmt.Sprintf("d%d", i))))
		}()
	}
	wg.Wait()
	cancel()
	for i, err := range errs {
		if !errors.Is(err, client.ErrInDoubt) {
			t.Fatalf("append d%d while answers are lost: %v, want ErrInDoubt", i, err)
		}
	}
	d.set(nil)
	committed := map[uint64]*client.Result{}
	for {
		res, err := p.Resolve(ctx)
		if res == nil && err == nil {
			break
		}
		if err != nil {
			t.Fatalf("resolve: %v", err)
		}
		committed[res.Sequence] = res
	}
	t.Logf("%d of 5 in-doubt transactions had committed", len(committed))
	res, err := p.Append(ctx, client.NewTxn().Add("t", []byte("after")))
	if err != nil {
		t.Fatalf("append after resolving: %v", err)
	}
	got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "t")
	n := 0
	for v, lsns := range got {
		if len(lsns) != 1 {
			t.Fatalf("%s in the log at %v", v, lsns)
		}
		n++
	}
	if n != 2+len(committed) || len(got["after"]) != 1 || got["after"][0] != res.LSN {
		t.Fatalf("log %v: want first, after and the %d resolved ones", got, len(committed))
	}
	for seq, r := range committed {
		found := false
		for _, lsns := range got {
			found = found || lsns[0] == r.LSN
		}
		if !found {
			t.Fatalf("resolved sequence %d at lsn %d is not in the log %v", seq, r.LSN, got)
		}
	}
}
