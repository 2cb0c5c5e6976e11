package target_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

func TestHandshakeReportsDurableState(t *testing.T) {
	store := &targettest.MemStore{}
	e := newEnv(t, store, func(c *target.Config) { c.IncarnationID = "inc-1" })
	s, ack := e.open(1, 1)
	if ack.AppliedLsn != 0 || ack.IncarnationId != "inc-1" ||
		ack.ProtocolVersion != targetpb.ProtocolVersion_PROTOCOL_VERSION_1 || len(ack.Topics) != 0 {
		t.Fatalf("fresh HelloAck = %v", ack)
	}
	log := targettest.NewLog()
	if err := s.Send(log.Txn(targettest.Part{Topic: "b", Values: val("1")}, targettest.Part{Topic: "a", Values: [][]byte{{1}, {2}}})); err != nil {
		t.Fatal(err)
	}
	log.SkipLSNs(3)
	if err := s.Send(log.Txn(targettest.Part{Topic: "a", Values: val("3")})); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 5); err != nil {
		t.Fatal(err)
	}
	s.Close()

	_, ack = e.open(1, 2)
	want := []*targetpb.TopicOffset{{Topic: "a", NextOffset: 3}, {Topic: "b", NextOffset: 1}}
	if ack.AppliedLsn != 5 || len(ack.Topics) != 2 ||
		ack.Topics[0].String() != want[0].String() || ack.Topics[1].String() != want[1].String() {
		t.Fatalf("HelloAck after apply = %v, want lsn 5 topics %v", ack, want)
	}
}

func TestHelloRefusals(t *testing.T) {
	e := newEnv(t, &targettest.MemStore{}, nil)
	cases := []struct {
		name  string
		hello *targetpb.Hello
		code  codes.Code
		ec    logstorepb.ErrorCode
		words []string
	}{
		{"unknown protocol version", &targetpb.Hello{TargetId: "t1", Epoch: 1, ProtocolVersion: 7},
			codes.InvalidArgument, logstorepb.ErrorCode_UNSUPPORTED_PROTOCOL, []string{"version 7", "speaks 1"}},
		{"unspecified protocol version", &targetpb.Hello{TargetId: "t1", Epoch: 1},
			codes.InvalidArgument, logstorepb.ErrorCode_UNSUPPORTED_PROTOCOL, []string{"version 0"}},
		{"wrong target id", targettest.Hello("t2", 1, 1),
			codes.InvalidArgument, logstorepb.ErrorCode_WRONG_TARGET, []string{`"t2"`, `"t1"`}},
		{"epoch 0", targettest.Hello("t1", 0, 1),
			codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT, []string{"epoch 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := targettest.Open(ctxT(t), e.cc, c.hello)
			wantRefusal(t, err, c.code, c.ec)
			for _, w := range c.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// The refusals changed nothing: a valid Hello still works from LSN 0.
	if _, ack := e.open(1, 1); ack.AppliedLsn != 0 {
		t.Fatalf("applied lsn %d after refusals", ack.AppliedLsn)
	}
}

func TestFirstRequestMustBeHello(t *testing.T) {
	e := newEnv(t, &targettest.MemStore{}, nil)
	stream, err := targetpb.NewTargetClient(e.cc).Deliver(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&targetpb.DeliverRequest{Kind: &targetpb.DeliverRequest_Batch{Batch: &targetpb.Batch{}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantRefusal(t, err, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT)
}

func TestContinuityRefusals(t *testing.T) {
	part := func(topic string, first uint64, n int) *logstorepb.TxnSlice {
		sl := &logstorepb.TxnSlice{Topic: topic, FirstOffset: first}
		for range n {
			sl.Messages = append(sl.Messages, &logstorepb.Message{Value: []byte("v")})
		}
		return sl
	}
	// The stream first gets LSN 10 (topic a offsets 0..1) applied, then the bad batch.
	good := &targetpb.Delivery{Lsn: 10, Slices: []*logstorepb.TxnSlice{part("a", 0, 2)}}
	cases := []struct {
		name   string
		bad    []*targetpb.Delivery
		ec     logstorepb.ErrorCode
		code   codes.Code
		reason string
	}{
		{"duplicate lsn", []*targetpb.Delivery{{Lsn: 10}}, logstorepb.ErrorCode_CONTINUITY, codes.Aborted, "duplicate_lsn"},
		{"backwards lsn", []*targetpb.Delivery{{Lsn: 9, Slices: []*logstorepb.TxnSlice{part("b", 0, 1)}}},
			logstorepb.ErrorCode_CONTINUITY, codes.Aborted, "backwards_lsn"},
		{"backwards inside batch", []*targetpb.Delivery{{Lsn: 12}, {Lsn: 11}}, logstorepb.ErrorCode_CONTINUITY, codes.Aborted, "backwards_lsn"},
		{"offset gap", []*targetpb.Delivery{{Lsn: 11}, {Lsn: 12, Slices: []*logstorepb.TxnSlice{part("a", 3, 1)}}},
			logstorepb.ErrorCode_CONTINUITY, codes.Aborted, "offset_gap"},
		{"offset overlap", []*targetpb.Delivery{{Lsn: 11, Slices: []*logstorepb.TxnSlice{part("a", 1, 1)}}},
			logstorepb.ErrorCode_CONTINUITY, codes.Aborted, "offset_overlap"},
		{"lsn 0", []*targetpb.Delivery{{Lsn: 0}}, logstorepb.ErrorCode_INVALID_ARGUMENT, codes.InvalidArgument, "protocol"},
		{"topic twice", []*targetpb.Delivery{{Lsn: 11, Slices: []*logstorepb.TxnSlice{part("a", 2, 1), part("a", 3, 1)}}},
			logstorepb.ErrorCode_INVALID_ARGUMENT, codes.InvalidArgument, "protocol"},
		{"empty slice", []*targetpb.Delivery{{Lsn: 11, Slices: []*logstorepb.TxnSlice{part("c", 0, 0)}}},
			logstorepb.ErrorCode_INVALID_ARGUMENT, codes.InvalidArgument, "protocol"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := &targettest.MemStore{}
			reg := prometheus.NewRegistry()
			e := newEnv(t, store, func(cfg *target.Config) { cfg.Registerer = reg })
			s, _ := e.open(1, 1)
			if err := s.Send(good); err != nil {
				t.Fatal(err)
			}
			if err := s.Send(c.bad...); err != nil {
				t.Fatal(err)
			}
			err := s.Wait(ctxT(t))
			d := wantRefusal(t, err, c.code, c.ec)
			if c.ec == logstorepb.ErrorCode_CONTINUITY && d.AppliedLsn != 10 {
				t.Errorf("detail applied lsn %d, want 10", d.AppliedLsn)
			}
			if s.Acked() != 10 {
				t.Errorf("acked %d, want 10 (the good batch before the refusal)", s.Acked())
			}
			if got := appliedLSNs(store); !slices.Equal(got, []uint64{10}) {
				t.Errorf("applied %v, want [10]: nothing of the refused batch", got)
			}
			if n := refusalCount(t, reg, c.reason); n != 1 {
				t.Errorf("target_refusals_total{reason=%q} = %v, want 1", c.reason, n)
			}
			// The LogPlayer reconnects and resyncs from the real position.
			s2, ack := e.open(1, 2)
			if ack.AppliedLsn != 10 {
				t.Fatalf("resync HelloAck lsn %d, want 10", ack.AppliedLsn)
			}
			if err := s2.Send(&targetpb.Delivery{Lsn: 11, Slices: []*logstorepb.TxnSlice{part("a", 2, 1)}}); err != nil {
				t.Fatal(err)
			}
			if err := s2.WaitAck(ctxT(t), 11); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// refusalCount reads target_refusals_total{reason} from reg (0 if absent).
func refusalCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	return testmetric.Value(t, reg, "target_refusals_total", map[string]string{"reason": reason})
}

func TestProgressMarkersAdvanceAppliedLSN(t *testing.T) {
	store := &targettest.MemStore{}
	e := newEnv(t, store, nil)
	s, _ := e.open(1, 1)
	log := targettest.NewLog()
	if err := s.Send(log.Txn(targettest.Part{Topic: "a", Values: val("x")})); err != nil {
		t.Fatal(err)
	}
	log.SkipLSNs(40)
	if err := s.Send(log.Progress()); err != nil { // lsn 42
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 42); err != nil {
		t.Fatal(err)
	}
	st, _ := store.State()
	if st.AppliedLSN != 42 || st.Topics["a"] != 1 {
		t.Fatalf("state %+v, want lsn 42, a=1", st)
	}
	// A progress marker is continuity-checked like any delivery.
	if err := s.Send(&targetpb.Delivery{Lsn: 42}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, s.Wait(ctxT(t)), codes.Aborted, logstorepb.ErrorCode_CONTINUITY)
	if _, ack := e.open(1, 2); ack.AppliedLsn != 42 {
		t.Fatalf("HelloAck lsn %d, want 42", ack.AppliedLsn)
	}
}

func TestConfigTopicsRules(t *testing.T) {
	store := &targettest.MemStore{}
	e := newEnv(t, store, func(c *target.Config) { c.Topics = []string{"a"} })
	// With Topics set, a topic never seen must start at offset 0.
	s, _ := e.open(1, 1)
	if err := s.Send(&targetpb.Delivery{Lsn: 1, Slices: []*logstorepb.TxnSlice{{Topic: "a", FirstOffset: 5, Messages: []*logstorepb.Message{{}}}}}); err != nil {
		t.Fatal(err)
	}
	d := wantRefusal(t, s.Wait(ctxT(t)), codes.Aborted, logstorepb.ErrorCode_CONTINUITY)
	if d.Topic != "a" || d.ActualNextOffset != 0 || d.Lsn != 1 {
		t.Fatalf("detail %v", d)
	}
	// A topic outside Topics is a permanent refusal.
	s, _ = e.open(1, 2)
	if err := s.Send(&targetpb.Delivery{Lsn: 1, Slices: []*logstorepb.TxnSlice{{Topic: "zz", Messages: []*logstorepb.Message{{}}}}}); err != nil {
		t.Fatal(err)
	}
	err := s.Wait(ctxT(t))
	wantRefusal(t, err, codes.DataLoss, logstorepb.ErrorCode_APPLY_REJECTED)
	if !target.IsPermanent(err) {
		t.Fatalf("IsPermanent(%v) = false", err)
	}
	if len(store.Applied()) != 0 {
		t.Fatalf("applied %v", appliedLSNs(store))
	}
}

func TestFencing(t *testing.T) {
	store := &targettest.MemStore{}
	e := newEnv(t, store, nil)
	s1, _ := e.open(1, 1)
	log := targettest.NewLog()
	if err := s1.Send(log.Txn(targettest.Part{Topic: "a", Values: val("e1")})); err != nil {
		t.Fatal(err)
	}
	if err := s1.WaitAck(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}

	s2, ack := e.open(2, 1)
	if ack.AppliedLsn != 1 {
		t.Fatalf("epoch 2 HelloAck lsn %d", ack.AppliedLsn)
	}
	// The overtaken stream is closed, fenced.
	err := s1.Wait(ctxT(t))
	if d := wantRefusal(t, err, codes.FailedPrecondition, logstorepb.ErrorCode_STALE_EPOCH); d.Epoch != 2 {
		t.Fatalf("detail epoch %d", d.Epoch)
	}
	if !target.IsFenced(err) {
		t.Fatal("IsFenced = false")
	}
	// Epoch 1 arriving after 2 is refused, before and after a restart.
	_, _, err = targettest.Open(ctxT(t), e.cc, targettest.Hello("t1", 1, 9))
	wantRefusal(t, err, codes.FailedPrecondition, logstorepb.ErrorCode_STALE_EPOCH)
	if err := s2.Send(log.Txn(targettest.Part{Topic: "a", Values: val("e2")})); err != nil {
		t.Fatal(err)
	}
	if err := s2.WaitAck(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, store, nil) // a restarted target on the same durable state
	_, _, err = targettest.Open(ctxT(t), e2.cc, targettest.Hello("t1", 1, 1))
	wantRefusal(t, err, codes.FailedPrecondition, logstorepb.ErrorCode_STALE_EPOCH)
	if st, _ := store.State(); st.Epoch != 2 {
		t.Fatalf("persisted epoch %d, want 2", st.Epoch)
	}
}

// TestFencingUnderLoad: epoch 1 keeps sending while epoch 2 takes over; once
// epoch 2's HelloAck is out, nothing epoch 1 sent is applied.
func TestFencingUnderLoad(t *testing.T) {
	var mu sync.Mutex
	helloSeen := false // set once epoch 2's handshake stored the epoch
	var afterTakeover []string
	store := &targettest.MemStore{}
	store.BeforeApply = func(ds []*targetpb.Delivery, next target.State) error {
		mu.Lock()
		defer mu.Unlock()
		if next.Epoch == 2 {
			helloSeen = true
		}
		if helloSeen {
			for _, d := range ds {
				for _, sl := range d.Slices {
					afterTakeover = append(afterTakeover, string(sl.Messages[0].Value))
				}
			}
		}
		return nil
	}
	e := newEnv(t, store, nil)
	s1, _ := e.open(1, 1)
	done := make(chan error, 1) // the epoch 1 sender's result
	go func() {
		for lsn := uint64(1); ; lsn++ {
			d := &targetpb.Delivery{Lsn: lsn, Slices: []*logstorepb.TxnSlice{
				{Topic: "e1-" + fmt.Sprint(lsn), Messages: []*logstorepb.Message{{Value: []byte("e1")}}}}}
			if err := s1.Send(d); err != nil {
				done <- nil // the stream was closed under it: expected
				return
			}
			if ended, _ := s1.Ended(); ended {
				done <- nil
				return
			}
		}
	}()
	testwait.For(t, testwait.Max, "epoch 1 applied something", func() bool { return len(store.Applied()) > 10 })
	s2, ack := e.open(2, 1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, s1.Wait(ctxT(t)), codes.FailedPrecondition, logstorepb.ErrorCode_STALE_EPOCH)
	next := ack.AppliedLsn + 1
	if err := s2.Send(&targetpb.Delivery{Lsn: next, Slices: []*logstorepb.TxnSlice{{Topic: "e2", Messages: []*logstorepb.Message{{Value: []byte("e2")}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s2.WaitAck(ctxT(t), types.LSN(next)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(afterTakeover, []string{"e2"}) {
		t.Fatalf("applied after the takeover: %v, want only [e2]", afterTakeover)
	}
	if got := appliedLSNs(store); got[len(got)-1] != next || got[len(got)-2] != ack.AppliedLsn {
		t.Fatalf("applied tail %v, want ... %d %d", got[len(got)-2:], ack.AppliedLsn, next)
	}
}

func TestSameEpochNewerSessionTakesOver(t *testing.T) {
	e := newEnv(t, &targettest.MemStore{}, nil)
	s1, _ := e.open(3, 1)
	_, _ = e.open(3, 2)
	wantRefusal(t, s1.Wait(ctxT(t)), codes.Aborted, logstorepb.ErrorCode_SUPERSEDED)
	_, _, err := targettest.Open(ctxT(t), e.cc, targettest.Hello("t1", 3, 1))
	wantRefusal(t, err, codes.Aborted, logstorepb.ErrorCode_SUPERSEDED)
}

func TestPermanentApplyError(t *testing.T) {
	release := make(chan struct{})
	blocked := make(chan struct{}, 1) // the first delivery Apply signals it started
	store := &targettest.MemStore{}
	var first sync.Once
	store.BeforeApply = func(ds []*targetpb.Delivery, next target.State) error {
		if len(ds) == 0 {
			return nil // epoch record
		}
		first.Do(func() {
			blocked <- struct{}{}
			<-release
		})
		return refuseBad(ds)
	}
	reg := prometheus.NewRegistry()
	e := newEnv(t, store, func(c *target.Config) { c.Registerer = reg })
	s, _ := e.open(1, 1)
	log := targettest.NewLog()
	a := func(v string) *targetpb.Delivery { return log.Txn(targettest.Part{Topic: "a", Values: val(v)}) }
	if err := s.Send(a("1")); err != nil { // applied alone; blocks the applier
		t.Fatal(err)
	}
	<-blocked
	// Queued while the first Apply runs: one group of three batches.
	for _, b := range [][]*targetpb.Delivery{{a("2"), a("3")}, {a("4"), a("bad"), a("6")}, {a("7")}} {
		if err := s.Send(b...); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, testwait.Max, "3 batches queued", func() bool { return target.QueueLen(e.srv) == 3 })
	close(release)
	err := s.Wait(ctxT(t))
	d := wantRefusal(t, err, codes.DataLoss, logstorepb.ErrorCode_APPLY_REJECTED)
	if d.Lsn != 5 || !strings.Contains(err.Error(), "lsn 5") || !target.IsPermanent(err) {
		t.Fatalf("refusal %v (detail lsn %d), want one naming lsn 5", err, d.Lsn)
	}
	// The batch before the bad one is applied; nothing of the bad batch nor after.
	if got := appliedLSNs(store); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("applied %v, want [1 2 3]", got)
	}
	if s.Acked() != 3 {
		t.Fatalf("acked %d, want 3", s.Acked())
	}
	// A retry hits the same wall.
	s, ack := e.open(1, 2)
	if ack.AppliedLsn != 3 {
		t.Fatalf("HelloAck %d", ack.AppliedLsn)
	}
	bad := &targetpb.Delivery{Lsn: 4, Slices: []*logstorepb.TxnSlice{{Topic: "a", FirstOffset: 3, Messages: []*logstorepb.Message{{Value: []byte("4")}}}}}
	if err := s.Send(bad, &targetpb.Delivery{Lsn: 5, Slices: []*logstorepb.TxnSlice{{Topic: "a", FirstOffset: 4, Messages: []*logstorepb.Message{{Value: []byte("bad")}}}}}); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, s.Wait(ctxT(t)), codes.DataLoss, logstorepb.ErrorCode_APPLY_REJECTED)
	if n := refusalCount(t, reg, "permanent"); n != 2 {
		t.Fatalf("permanent refusals %v, want 2", n)
	}

	// The operator skips LSN 5: its data is dropped, its offsets advance.
	e2 := newEnv(t, store, func(c *target.Config) { c.SkipLSNs = []types.LSN{5} })
	s, _ = e2.open(1, 3)
	if err := s.Send(bad, &targetpb.Delivery{Lsn: 5, Slices: []*logstorepb.TxnSlice{{Topic: "a", FirstOffset: 4, Messages: []*logstorepb.Message{{Value: []byte("bad")}}}}},
		&targetpb.Delivery{Lsn: 6, Slices: []*logstorepb.TxnSlice{{Topic: "a", FirstOffset: 5, Messages: []*logstorepb.Message{{Value: []byte("6")}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 6); err != nil {
		t.Fatal(err)
	}
	applied := store.Applied()
	if got := appliedLSNs(store); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) || len(applied[4].Slices) != 0 {
		t.Fatalf("applied %v (lsn 5 slices %d), want 1..6 with lsn 5 as a marker", got, len(applied[4].Slices))
	}
	if st, _ := store.State(); st.Topics["a"] != 6 {
		t.Fatalf("topic a next %d, want 6", st.Topics["a"])
	}
}

func TestTransientStoreFailure(t *testing.T) {
	var failNext sync.Once
	store := &targettest.MemStore{}
	store.BeforeApply = func(ds []*targetpb.Delivery, next target.State) error {
		var err error
		if len(ds) > 0 && ds[0].Lsn == 2 {
			failNext.Do(func() { err = errors.New("disk on fire") })
		}
		return err
	}
	e := newEnv(t, store, nil)
	s, _ := e.open(1, 1)
	log := targettest.NewLog()
	d1, d2 := log.Txn(targettest.Part{Topic: "a", Values: val("1")}), log.Txn(targettest.Part{Topic: "a", Values: val("2")})
	if err := s.Send(d1); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(d2); err != nil {
		t.Fatal(err)
	}
	err := s.Wait(ctxT(t))
	wantRefusal(t, err, codes.Internal, logstorepb.ErrorCode_INTERNAL)
	if target.IsPermanent(err) {
		t.Fatal("a transient failure reported as permanent")
	}
	s, ack := e.open(1, 2)
	if ack.AppliedLsn != 1 {
		t.Fatalf("HelloAck %d, want 1", ack.AppliedLsn)
	}
	if err := s.Send(d2); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 2); err != nil {
		t.Fatal(err)
	}
}

// A Store that reports a newer epoch than the stream's (another process
// sharing it stored one: ErrStaleEpoch) ends the stream with STALE_EPOCH
// naming that epoch, not INTERNAL: the LogPlayer stops there instead of
// reconnecting to learn it. Nothing of the batch is acked.
func TestStoreStaleEpoch(t *testing.T) {
	store := &targettest.MemStore{}
	store.BeforeApply = func(ds []*targetpb.Delivery, next target.State) error {
		if len(ds) > 0 && ds[0].Lsn == 2 {
			return target.StaleEpoch(5, fmt.Errorf("the database holds epoch 5, above %d", next.Epoch))
		}
		return nil
	}
	e := newEnv(t, store, nil)
	s, _ := e.open(1, 1)
	log := targettest.NewLog()
	if err := s.Send(log.Txn(targettest.Part{Topic: "a", Values: val("1")})); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(log.Txn(targettest.Part{Topic: "a", Values: val("2")})); err != nil {
		t.Fatal(err)
	}
	err := s.Wait(ctxT(t))
	d := wantRefusal(t, err, codes.FailedPrecondition, logstorepb.ErrorCode_STALE_EPOCH)
	if !target.IsFenced(err) || d.Epoch != 5 || s.Acked() != 1 {
		t.Fatalf("stream ended with %v (detail epoch %d, acked %d), want fenced by epoch 5 with lsn 1 acked", err, d.Epoch, s.Acked())
	}
	if !errors.Is(target.StaleEpoch(5, errors.New("x")), target.ErrStaleEpoch) {
		t.Fatal("StaleEpoch does not match ErrStaleEpoch")
	}
}

func TestGroupCommit(t *testing.T) {
	release := make(chan struct{})
	blocked := make(chan struct{}, 1) // the first delivery Apply signals it started
	var calls [][]uint64
	var mu sync.Mutex
	store := &targettest.MemStore{}
	store.BeforeApply = func(ds []*targetpb.Delivery, next target.State) error {
		if len(ds) == 0 {
			return nil
		}
		mu.Lock()
		first := len(calls) == 0
		var lsns []uint64
		for _, d := range ds {
			lsns = append(lsns, d.Lsn)
		}
		calls = append(calls, lsns)
		mu.Unlock()
		if first {
			blocked <- struct{}{}
			<-release
		}
		return nil
	}
	reg := prometheus.NewRegistry()
	e := newEnv(t, store, func(c *target.Config) { c.Registerer = reg })
	s, _ := e.open(1, 1)
	log := targettest.NewLog()
	for i := range 6 {
		if err := s.Send(log.Txn(targettest.Part{Topic: "a", Values: val(fmt.Sprint(i))}), log.Progress()); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			<-blocked
		}
	}
	testwait.For(t, testwait.Max, "5 batches queued behind the slow Apply", func() bool { return target.QueueLen(e.srv) == 5 })
	close(release)
	if err := s.WaitAck(ctxT(t), 12); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := [][]uint64{{1, 2}, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("Apply calls %v, want %v (6 batches in 2 local transactions)", calls, want)
	}
	if n := histogramCount(t, reg, "target_apply_group_batches"); n != 2 {
		t.Fatalf("target_apply_group_batches count %d, want 2", n)
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	return uint64(testmetric.Value(t, reg, name, nil))
}

func TestCloseSendEndsWithOKAfterApplying(t *testing.T) {
	store := &targettest.MemStore{}
	e := newEnv(t, store, nil)
	s, _ := e.open(1, 1)
	log := targettest.NewLog()
	for range 20 {
		if err := s.Send(log.Txn(targettest.Part{Topic: "a", Values: val("x")})); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(ctxT(t)); err != nil {
		t.Fatalf("stream ended with %v, want OK", err)
	}
	if s.Acked() != 20 || len(store.Applied()) != 20 {
		t.Fatalf("acked %d applied %d, want 20", s.Acked(), len(store.Applied()))
	}
}

func TestCloseEndsStreamsUnavailable(t *testing.T) {
	e := newEnv(t, &targettest.MemStore{}, nil)
	s, _ := e.open(1, 1)
	e.srv.Close()
	wantRefusal(t, s.Wait(ctxT(t)), codes.Unavailable, logstorepb.ErrorCode_SHUTTING_DOWN)
	_, _, err := targettest.Open(ctxT(t), e.cc, targettest.Hello("t1", 1, 2))
	wantRefusal(t, err, codes.Unavailable, logstorepb.ErrorCode_SHUTTING_DOWN)
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]target.Config{
		"no target id":   {Store: &targettest.MemStore{}},
		"no store":       {TargetID: "x"},
		"repeated topic": {TargetID: "x", Store: &targettest.MemStore{}, Topics: []string{"a", "a"}},
		"skip lsn 0":     {TargetID: "x", Store: &targettest.MemStore{}, SkipLSNs: []types.LSN{0}},
		"negative bound": {TargetID: "x", Store: &targettest.MemStore{}, MaxGroupDeliveries: -1},
		"negative queue": {TargetID: "x", Store: &targettest.MemStore{}, MaxQueueBytes: -1},
		"negative close": {TargetID: "x", Store: &targettest.MemStore{}, CloseTimeout: -1},
	}
	for name, cfg := range cases {
		if _, err := target.NewServer(cfg); !errors.Is(err, target.ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
}
