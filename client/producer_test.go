package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// dropper is a gRPC server interceptor that lets Append (or AppendBatch)
// run (commit) and then loses its response, for the requests drop selects.
type dropper struct {
	mu   sync.Mutex
	drop func(req *logstorepb.AppendRequest, seen int) (lose, hang bool) // seen: earlier sends of (producer, seq)
	seen map[string]int
	lost atomic.Int64 // responses lost after a successful apply
}

func newDropper() *dropper { return &dropper{seen: map[string]int{}} }

func (d *dropper) set(f func(req *logstorepb.AppendRequest, seen int) (lose, hang bool)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drop = f
}

func (d *dropper) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	answered := logstoretest.AnsweredAppends(req, resp, err)
	d.mu.Lock()
	lose, hang := false, false
	for _, ar := range answered {
		key := fmt.Sprintf("%s/%d", ar.ProducerId, ar.Sequence)
		seen := d.seen[key]
		d.seen[key]++
		if d.drop != nil {
			l, h := d.drop(ar, seen)
			lose, hang = lose || l, hang || h
		}
	}
	d.mu.Unlock()
	if !lose {
		return resp, err
	}
	d.lost.Add(int64(len(answered))) // a lost batch answer loses every request in it
	if hang {                        // the response never comes: the client's attempt times out
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, status.Error(codes.Unavailable, "test: response lost after commit")
}

// lossyCluster starts n nodes whose Append responses d may lose.
func lossyCluster(t *testing.T, n int, d *dropper) *logstoretest.Cluster {
	return logstoretest.Start(t, n, nil, grpc.ChainUnaryInterceptor(d.intercept))
}

// readLog returns the transactions [1, to] through a Reader.
func readLog(t testing.TB, cl *client.Client, to types.LSN) []*client.Transaction {
	t.Helper()
	if to == 0 {
		return nil
	}
	r, err := cl.NewReader(client.ReaderConfig{FromLSN: 1, ToLSN: to})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []*client.Transaction
	ctx := ctxT(t, 60*time.Second)
	for {
		txn, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read log: %v", err)
		}
		out = append(out, txn)
	}
}

// leaderHead returns the leader's head LSN.
func leaderHead(t testing.TB, cl *client.Client) types.LSN {
	t.Helper()
	st, err := cl.LeaderStatus(ctxT(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return types.LSN(st.HeadLsn)
}

// valuesIn returns value -> LSNs of every message of topic in txns.
func valuesIn(txns []*client.Transaction, topic string) map[string][]types.LSN {
	out := map[string][]types.LSN{}
	for _, txn := range txns {
		for _, s := range txn.Slices {
			if s.Topic == topic {
				for _, m := range s.Messages {
					out[string(m.Value)] = append(out[string(m.Value)], types.LSN(txn.Lsn))
				}
			}
		}
	}
	return out
}

// TestLostResponseExactlyOnce: the interceptor commits an Append and then
// loses its response (an error, or no answer until the attempt times
// out); the producer retries with the same sequence and every transaction
// is in the log exactly once, with the first result. A plain Append
// (no producer) in the same situation returns the error and is in the log
// anyway: the loss is real.
func TestLostResponseExactlyOnce(t *testing.T) {
	d := newDropper()
	c := lossyCluster(t, 3, d)
	cl, err := client.New(client.Config{Addrs: c.Addrs(), Logger: logstoretest.QuietLogger(), AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx := ctxT(t, 60*time.Second)

	// Control: without a producer the lost response is an error.
	d.set(func(req *logstorepb.AppendRequest, seen int) (bool, bool) { return req.ProducerId == "", false })
	if _, err := cl.Append(ctx, client.NewTxn().Add("plain", []byte("once")).Request()); err == nil {
		t.Fatal("plain append with a lost response succeeded: the interceptor lost nothing")
	}

	p := newProducer(t, cl, client.ProducerConfig{ID: "lossy"})
	d.set(func(req *logstorepb.AppendRequest, seen int) (bool, bool) {
		id, _ := p.RegisteredID()
		switch {
		case req.ProducerId != id || seen > 0:
			return false, false
		case req.Sequence == 2: // hang: the attempt times out (AttemptTimeout)
			return true, true
		default:
			return req.Sequence%2 == 1, false // 1, 3, 5: error after commit
		}
	})
	var results []*client.Result
	for i := range 6 {
		res, err := p.Append(ctx, client.NewTxn().Add("orders", []byte(fmt.Sprintf("order-%d", i))).Add("audit", []byte(fmt.Sprintf("audit-%d", i))))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if want := uint64(i + 1); res.Sequence != want {
			t.Fatalf("append %d used sequence %d, want %d", i, res.Sequence, want)
		}
		if lost := res.Sequence <= 3 || res.Sequence == 5; res.Duplicate != lost {
			t.Fatalf("sequence %d: duplicate %v, response lost %v", res.Sequence, res.Duplicate, lost)
		}
		results = append(results, res)
	}
	if got := d.lost.Load(); got != 1+4 {
		t.Fatalf("%d responses lost, want 5 (1 plain, 4 producer)", got)
	}
	head := leaderHead(t, cl)
	if head != 1+6 {
		t.Fatalf("head %d, want 7: 1 plain + 6 producer transactions", head)
	}
	txns := readLog(t, cl, head)
	if v := valuesIn(txns, "plain")["once"]; len(v) != 1 {
		t.Fatalf("plain txn at lsns %v, want once", v)
	}
	orders, audit := valuesIn(txns, "orders"), valuesIn(txns, "audit")
	for i, res := range results {
		o, a := orders[fmt.Sprintf("order-%d", i)], audit[fmt.Sprintf("audit-%d", i)]
		if len(o) != 1 || len(a) != 1 || o[0] != res.LSN || a[0] != res.LSN {
			t.Fatalf("txn %d at lsns %v / %v, result lsn %d: want exactly once, atomically, at the result's lsn", i, o, a, res.LSN)
		}
		if res.Offsets["orders"] != types.Offset(i) {
			t.Fatalf("txn %d orders offset %d", i, res.Offsets["orders"])
		}
	}
}

// TestInDoubtThenResolve: while every response is lost the caller's
// deadline ends: Append reports ErrInDoubt, refuses new transactions
// without sending them, and Resolve later returns the first result.
func TestInDoubtThenResolve(t *testing.T) {
	d := newDropper()
	c := lossyCluster(t, 1, d)
	cl := newClient(t, c.Addrs()...)
	p := newProducer(t, cl, client.ProducerConfig{})
	ctx := ctxT(t, 60*time.Second)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err := p.Append(done, client.NewTxn().Add("t", []byte("never")))
	if !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrInDoubt) {
		t.Fatalf("append with a cancelled context: %v, want context.Canceled, not in doubt", err)
	}
	if res, err := p.Append(ctx, client.NewTxn().Add("t", []byte("first"))); err != nil || res.Sequence != 1 {
		t.Fatalf("first append = %+v, %v; want sequence 1", res, err)
	}
	d.set(func(*logstorepb.AppendRequest, int) (bool, bool) { return true, false })
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = p.Append(short, client.NewTxn().Add("t", []byte("doubt")))
	cancel()
	var ide *client.InDoubtError
	if id, _ := p.RegisteredID(); !errors.As(err, &ide) || !errors.Is(err, client.ErrInDoubt) || ide.Sequence != 2 || ide.ProducerID != id {
		t.Fatalf("append while responses are lost: %v, want *InDoubtError for sequence 2", err)
	}
	before := d.lost.Load()
	if _, err := p.Append(ctx, client.NewTxn().Add("t", []byte("next"))); !errors.Is(err, client.ErrInDoubt) {
		t.Fatalf("append while in doubt: %v, want ErrInDoubt", err)
	}
	if d.lost.Load() != before {
		t.Fatal("append while in doubt sent a request")
	}
	if seq, _ := p.NextSequence(ctx); seq != 2 {
		t.Fatalf("next sequence %d while 2 is in doubt", seq)
	}
	d.set(nil)
	res, err := p.Resolve(ctx)
	if err != nil || !res.Duplicate || res.Sequence != 2 || res.LSN != 2 {
		t.Fatalf("resolve = %+v, %v; want the committed first result (lsn 2, duplicate)", res, err)
	}
	if res, err := p.Resolve(ctx); res != nil || err != nil {
		t.Fatalf("resolve with nothing in doubt = %v, %v", res, err)
	}
	res, err = p.Append(ctx, client.NewTxn().Add("t", []byte("next")))
	if err != nil || res.Sequence != 3 || res.LSN != 3 {
		t.Fatalf("append after resolve = %+v, %v", res, err)
	}
	if got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "t"); len(got) != 3 || len(got["doubt"]) != 1 {
		t.Fatalf("log values %v", got)
	}
}

// TestFencedAndTableFullReported: an invalid transaction does not use up a
// sequence; a new producer when the table is full of recently active ones
// gets TABLE_FULL (nothing written, nobody evicted); a second instance with
// the same name fences the first, whose Appends then get a *FencedError
// (ErrProducerFenced) without writing and without registering again.
func TestFencedAndTableFullReported(t *testing.T) {
	c := logstoretest.Start(t, 1, func(cfg *logstore.Config) { cfg.MaxProducers = 2 })
	cl := newClient(t, c.Addrs()...)
	ctx := ctxT(t, 60*time.Second)
	one := func(p *client.Producer, v string) (*client.Result, error) {
		return p.Append(ctx, client.NewTxn().Add("t", []byte(v)))
	}
	p1 := newProducer(t, cl, client.ProducerConfig{ID: "p1"})
	if _, err := p1.Append(ctx, client.NewTxn()); status.Code(err) != codes.InvalidArgument || apierr.CodeOf(err) != logstorepb.ErrorCode_EMPTY_TRANSACTION {
		t.Fatalf("empty txn: %v", err)
	}
	if res, err := one(p1, "p1-a"); err != nil || res.Sequence != 1 {
		t.Fatalf("after an invalid txn: %+v, %v; want sequence 1", res, err)
	}
	a := newProducer(t, cl, client.ProducerConfig{ID: "shared"})
	if _, err := one(a, "a"); err != nil {
		t.Fatal(err)
	}
	_, err := one(newProducer(t, cl, client.ProducerConfig{ID: "p3"}), "p3")
	if apierr.CodeOf(err) != logstorepb.ErrorCode_TABLE_FULL || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third producer in a table of 2: %v, want TABLE_FULL", err)
	}
	if res, err := one(p1, "p1-b"); err != nil || res.Sequence != 2 {
		t.Fatalf("p1 after the refused registration: %+v, %v", res, err)
	}

	b := newProducer(t, cl, client.ProducerConfig{ID: "shared"})
	if _, err := one(b, "b"); err != nil {
		t.Fatalf("second instance of a name: %v", err)
	}
	idA, epochA := a.RegisteredID()
	idB, epochB := b.RegisteredID()
	if idA != idB || epochB != epochA+1 {
		t.Fatalf("registrations %s/%d and %s/%d: want one id, the next epoch", idA, epochA, idB, epochB)
	}
	_, err = one(a, "a-zombie")
	var fe *client.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, client.ErrProducerFenced) || fe.Epoch != epochA || fe.Current != epochB || fe.InDoubt {
		t.Fatalf("zombie append: %v, want *FencedError epoch %d by %d", err, epochA, epochB)
	}
	if apierr.CodeOf(err) != logstorepb.ErrorCode_PRODUCER_FENCED {
		t.Fatalf("detail not reachable through the error: %v", err)
	}
	if _, err := one(a, "a-zombie-2"); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("fenced producer appended again: %v", err)
	}
	if _, epoch := b.RegisteredID(); epoch != epochB {
		t.Fatalf("the zombie registered again (epoch %d)", epoch)
	}
	if _, err := one(b, "b-2"); err != nil {
		t.Fatalf("the live instance after the zombie: %v", err)
	}
	got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "t")
	if len(got) != 5 || got["a-zombie"] != nil || got["a-zombie-2"] != nil || got["p3"] != nil {
		t.Fatalf("log values %v: refused transactions were written", got)
	}
}

// TestConditionalAppendRace: writers race on one topic, each expecting the
// next offset it believes in; exactly one wins each offset, and the topic
// holds the winners' messages densely, in offset order.
func TestConditionalAppendRace(t *testing.T) {
	c := logstoretest.Start(t, 3, nil)
	cl := newClient(t, c.Addrs()...)
	const writers, offsets = 6, 40
	var mu sync.Mutex
	won := map[types.Offset]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxT(t, 120*time.Second)
			p := newProducer(t, cl, client.ProducerConfig{})
			expected := types.Offset(0)
			for attempt := 0; ; attempt++ {
				mu.Lock()
				done := len(won) >= offsets
				mu.Unlock()
				if done {
					return
				}
				v := fmt.Sprintf("w%d-%d", w, attempt)
				res, err := p.Append(ctx, client.NewTxn().Add("race", []byte(v)).Expect("race", expected))
				var ce *client.ConditionError
				if errors.As(err, &ce) {
					if ce.Topic != "race" || ce.Actual <= expected {
						t.Errorf("condition error %+v after expecting %d", ce, expected)
						return
					}
					expected = ce.Actual
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				off := res.Offsets["race"]
				mu.Lock()
				if prev, ok := won[off]; ok || off != expected {
					t.Errorf("offset %d won by %s (also %q), expected %d", off, v, prev, expected)
				}
				won[off] = v
				mu.Unlock()
				expected = off + 1
			}
		}()
	}
	wg.Wait()
	r, err := cl.NewTopicReader(client.TopicReaderConfig{Topic: "race", Limit: uint64(len(won))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := ctxT(t, 60*time.Second)
	for off := range types.Offset(len(won)) {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if types.Offset(m.Offset) != off || string(m.Message.Value) != won[off] {
			t.Fatalf("offset %d holds %q (offset %d), winner %q", off, m.Message.Value, m.Offset, won[off])
		}
	}
	ts, err := cl.DescribeTopic(ctx, "race") // the leader's count (Status lists only the first topics)
	if err != nil {
		t.Fatal(err)
	}
	if ts.NextOffset != uint64(len(won)) {
		t.Fatalf("race has %d messages, %d winners: a loser was written", ts.NextOffset, len(won))
	}
}
