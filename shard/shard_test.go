package shard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

var ctxT = targettest.Context

// running is a shard served on 127.0.0.1:0.
type running struct {
	sh   *shard.Shard
	cc   *grpc.ClientConn
	addr string
	stop func()
}

func start(t testing.TB, cfg shard.Config) *running {
	t.Helper()
	sh, err := shard.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1) // the Serve result
	go func() { done <- sh.Serve(ctx, lis) }()
	r := &running{sh: sh, cc: targettest.Dial(t, lis.Addr().String()), addr: lis.Addr().String()}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := sh.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	t.Cleanup(r.stop)
	return r
}

func (r *running) open(t *testing.T, id types.TargetID, epoch types.Epoch) (*targettest.Sender, *targetpb.HelloAck) {
	t.Helper()
	s, ack, err := targettest.Open(ctxT(t), r.cc, targettest.Hello(id, epoch, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, ack
}

func put(k, v string) []byte { return shard.EncodePut([]byte(k), []byte(v)) }
func del(k string) []byte    { return shard.EncodeDelete([]byte(k)) }

func TestApplyAndRead(t *testing.T) {
	dir := t.TempDir()
	r := start(t, shard.Config{Dir: dir, ID: "shard-1"})
	s, ack := r.open(t, "shard-1", 1)
	if ack.AppliedLsn != 0 {
		t.Fatalf("fresh shard lsn %d", ack.AppliedLsn)
	}
	log := targettest.NewLog()
	own := func(vals ...[]byte) targettest.Part { return targettest.Part{Topic: "shard-1", Values: vals} }
	ds := []*targetpb.Delivery{
		log.Txn(own(put("a/1", "x"), put("a/2", "y"), put("b/1", "z"))),
		log.Txn(own(del("a/2"), put("a/3", "w"))),
		log.Progress(),
		log.Txn(own(put("a/1", "x2"))),
	}
	if err := s.Send(ds[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ds[2:]...); err != nil {
		t.Fatal(err)
	}

	client := shardpb.NewShardClient(r.cc)
	w, err := client.WaitApplied(ctxT(t), &shardpb.WaitAppliedRequest{Lsn: 4})
	if err != nil || w.AppliedLsn < 4 {
		t.Fatalf("WaitApplied: %v %v", w, err)
	}
	g, err := client.Get(ctxT(t), &shardpb.GetRequest{Key: []byte("a/1")})
	if err != nil || !g.Found || string(g.Value) != "x2" || g.AppliedLsn != 4 {
		t.Fatalf("Get a/1 = %v, %v", g, err)
	}
	g, err = client.Get(ctxT(t), &shardpb.GetRequest{Key: []byte("a/2")})
	if err != nil || g.Found {
		t.Fatalf("Get deleted a/2 = %v, %v", g, err)
	}
	sc, err := client.Scan(ctxT(t), &shardpb.ScanRequest{Prefix: []byte("a/")})
	if err != nil {
		t.Fatal(err)
	}
	if got := kvString(sc.Items); got != "a/1=x2 a/3=w" || sc.Truncated || sc.AppliedLsn != 4 {
		t.Fatalf("Scan a/ = %s truncated=%v lsn=%d", got, sc.Truncated, sc.AppliedLsn)
	}
	sc, err = client.Scan(ctxT(t), &shardpb.ScanRequest{Limit: 2})
	if err != nil || kvString(sc.Items) != "a/1=x2 a/3=w" || !sc.Truncated {
		t.Fatalf("Scan limit 2 = %v, %v", sc, err)
	}
	_, err = client.Scan(ctxT(t), &shardpb.ScanRequest{Limit: shard.MaxScanLimit + 1})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Scan over the limit: %v", err)
	}
	_, err = client.Get(ctxT(t), &shardpb.GetRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Get empty key: %v", err)
	}

	// The shard's state is the model's.
	model := map[string][]byte{}
	for _, d := range ds {
		if err := shard.ModelApply(model, []string{"shard-1"}, d.Slices); err != nil {
			t.Fatal(err)
		}
	}
	r.stop()
	data, st, err := shard.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(data, model, bytes.Equal) || st.AppliedLSN != 4 || st.Epoch != 1 || st.Topics["shard-1"] != 6 {
		t.Fatalf("on disk %v %+v, model %v", data, st, model)
	}
}

func kvString(kvs []*shardpb.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, string(kv.Key)+"="+string(kv.Value))
	}
	return strings.Join(parts, " ")
}

func TestWaitAppliedDeadline(t *testing.T) {
	r := start(t, shard.Config{Dir: t.TempDir(), ID: "shard-1", WaitAppliedMax: 50 * time.Millisecond})
	_, err := shardpb.NewShardClient(r.cc).WaitApplied(ctxT(t), &shardpb.WaitAppliedRequest{Lsn: 1})
	if status.Code(err) != codes.DeadlineExceeded || target.Detail(err).GetCode() != logstorepb.ErrorCode_TIMEOUT {
		t.Fatalf("WaitApplied beyond the head: %v", err)
	}
}

func TestRestartKeepsStateAndEpoch(t *testing.T) {
	dir := t.TempDir()
	r := start(t, shard.Config{Dir: dir, ID: "shard-2"})
	s, _ := r.open(t, "shard-2", 5)
	log := targettest.NewLog()
	log.SkipLSNs(9)
	if err := s.Send(log.Txn(targettest.Part{Topic: "shard-2", Values: [][]byte{put("k", "v")}})); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 10); err != nil {
		t.Fatal(err)
	}
	r.stop()

	r = start(t, shard.Config{Dir: dir, ID: "shard-2"})
	if _, _, err := targettest.Open(ctxT(t), r.cc, targettest.Hello("shard-2", 4, 1)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("older epoch after restart: %v", err)
	}
	_, ack := r.open(t, "shard-2", 5)
	if ack.AppliedLsn != 10 || len(ack.Topics) != 1 || ack.Topics[0].Topic != "shard-2" || ack.Topics[0].NextOffset != 1 {
		t.Fatalf("HelloAck after restart %v", ack)
	}
	if v, found, lsn, err := r.sh.Get([]byte("k")); err != nil || !found || string(v) != "v" || lsn != 10 {
		t.Fatalf("Get after restart: %q %v %d %v", v, found, lsn, err)
	}
}

func TestMalformedMutationRefusedPermanently(t *testing.T) {
	bad := map[string][]byte{
		"not protobuf":        {0xff, 0xff, 0xff},
		"op unspecified":      mustMarshal(t, &shardpb.Mutation{Key: []byte("k")}),
		"empty key":           mustMarshal(t, &shardpb.Mutation{Op: shardpb.Mutation_PUT}),
		"delete with value":   mustMarshal(t, &shardpb.Mutation{Op: shardpb.Mutation_DELETE, Key: []byte("k"), Value: []byte("v")}),
		"unknown field":       append(put("k", "v"), 0x20, 0x01), // field 4, varint 1
		"key above bbolt max": shard.EncodePut(bytes.Repeat([]byte("k"), 32769), nil),
	}
	for name, value := range bad {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r := start(t, shard.Config{Dir: dir, ID: "shard-1"})
			s, _ := r.open(t, "shard-1", 1)
			log := targettest.NewLog()
			own := func(vals ...[]byte) targettest.Part { return targettest.Part{Topic: "shard-1", Values: vals} }
			if err := s.Send(log.Txn(own(put("before", "1")))); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitAck(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			// One batch: a good transaction, then the bad one.
			if err := s.Send(log.Txn(own(put("same-batch", "2"))), log.Txn(own(put("same-txn", "3"), value))); err != nil {
				t.Fatal(err)
			}
			err := s.Wait(ctxT(t))
			if !target.IsPermanent(err) || target.Detail(err).GetLsn() != 3 || !strings.Contains(err.Error(), "lsn 3") {
				t.Fatalf("got %v, want a permanent refusal naming lsn 3", err)
			}
			r.stop()
			data, st, err := shard.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(data) != fmt.Sprint(map[string][]byte{"before": []byte("1")}) || st.AppliedLSN != 1 || st.Topics["shard-1"] != 1 {
				t.Fatalf("after refusal: data %q state %+v; want only lsn 1", data, st)
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOtherTopicRefused(t *testing.T) {
	r := start(t, shard.Config{Dir: t.TempDir(), ID: "shard-1", Topics: []string{"shard-1", "shard-9"}})
	s, _ := r.open(t, "shard-1", 1)
	log := targettest.NewLog()
	if err := s.Send(log.Txn(targettest.Part{Topic: "shard-9", Values: [][]byte{put("k", "v")}},
		targettest.Part{Topic: "orders", Values: [][]byte{[]byte("{}")}})); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(ctxT(t)); !target.IsPermanent(err) || target.Detail(err).GetTopic() != "orders" {
		t.Fatalf("slice of a topic not owned: %v", err)
	}
	if r.sh.AppliedLSN() != 0 {
		t.Fatalf("applied %d", r.sh.AppliedLSN())
	}
}

func TestModelApply(t *testing.T) {
	model := map[string][]byte{"x": []byte("old")}
	sl := []*logstorepb.TxnSlice{
		{Topic: "shard-1", Messages: []*logstorepb.Message{{Value: put("a", "1")}, {Value: del("x")}}},
		{Topic: "shard-2", Messages: []*logstorepb.Message{{Value: put("b", "2")}}},
	}
	if err := shard.ModelApply(model, []string{"shard-1"}, sl); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(model) != fmt.Sprint(map[string][]byte{"a": []byte("1")}) {
		t.Fatalf("model %q", model)
	}
	sl[0].Messages = append(sl[0].Messages, &logstorepb.Message{Value: []byte{0xff}})
	sl[0].FirstOffset = 7
	err := shard.ModelApply(model, []string{"shard-1"}, sl)
	if !errors.Is(err, shard.ErrMalformed) || !strings.Contains(err.Error(), "offset 9") || len(model) != 1 {
		t.Fatalf("malformed: err %v model %q", err, model)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, cfg := range map[string]shard.Config{
		"no dir":   {ID: "s"},
		"no id":    {Dir: t.TempDir()},
		"negative": {Dir: t.TempDir(), ID: "s", LockWait: -1},
	} {
		if _, err := shard.Open(cfg); !errors.Is(err, shard.ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeMutation(f *testing.F) {
	f.Add(put("k", "v"))
	f.Add(del("k"))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := shard.DecodeMutation(b)
		if err != nil {
			if !errors.Is(err, shard.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(m.Key) == 0 || (m.Op != shardpb.Mutation_PUT && m.Op != shardpb.Mutation_DELETE) {
			t.Fatalf("accepted %v", m)
		}
		again, err := shard.DecodeMutation(mustMarshal(t, m))
		if err != nil || !proto.Equal(again, m) {
			t.Fatalf("re-encoding %v: %v %v", m, again, err)
		}
	})
}

// countingStore counts the Apply calls that reach the shard's store.
type countingStore struct {
	target.Store
	mu    sync.Mutex
	calls int
}

func (c *countingStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.Store.Apply(ds, next)
}

func TestWrapStoreAndLargeBatch(t *testing.T) {
	cs := &countingStore{}
	r := start(t, shard.Config{Dir: t.TempDir(), ID: "shard-1", WrapStore: func(s target.Store) target.Store {
		cs.Store = s
		return cs
	}})
	s, _ := r.open(t, "shard-1", 1)
	// One batch of about 6 MiB: above gRPC's default 4 MiB receive limit.
	log := targettest.NewLog()
	big := bytes.Repeat([]byte("v"), 64<<10)
	var ds []*targetpb.Delivery
	for i := range 96 {
		ds = append(ds, log.Txn(targettest.Part{Topic: "shard-1", Values: [][]byte{put(fmt.Sprint(i), string(big))}}))
	}
	if err := s.Send(ds...); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 96); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.calls != 2 { // the epoch record, then the batch
		t.Fatalf("wrapper saw %d Apply calls, want 2", cs.calls)
	}
}

// The log identity a Hello gave is stored in the shard file: after a
// restart a Hello from another incarnation is refused (OTHER_LOG).
func TestRestartKeepsLogIdentity(t *testing.T) {
	dir := t.TempDir()
	r := start(t, shard.Config{Dir: dir, ID: "shard-1"})
	h := targettest.Hello("shard-1", 1, 1)
	h.LogClusterId, h.LogIncarnation = "c1", "i1"
	s, _, err := targettest.Open(ctxT(t), r.cc, h)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r.stop()

	r = start(t, shard.Config{Dir: dir, ID: "shard-1"})
	h.Session, h.LogIncarnation = 2, "i2"
	if _, _, err := targettest.Open(ctxT(t), r.cc, h); target.Detail(err).GetCode() != logstorepb.ErrorCode_OTHER_LOG {
		t.Fatalf("Hello of another incarnation after restart: %v, want OTHER_LOG", err)
	}
	h.LogIncarnation = "i1"
	_, ack, err := targettest.Open(ctxT(t), r.cc, h)
	if err != nil || ack.LogClusterId != "c1" || ack.LogIncarnation != "i1" {
		t.Fatalf("Hello of the stored identity after restart: %v (ack %v)", err, ack)
	}
}
