package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
	"github.com/logplayer/logplayer/types"
)

// fakeLog is a LogStore stand-in: dense LSNs and per-topic offsets, a
// registered-producer table (InitProducer; an Append of an unregistered
// id or epoch is refused, as a store without --allow-legacy-producers
// does), and (when flaky) every third request written but answered
// Unavailable, as a leader that lost its lease after commit.
type fakeLog struct {
	mu        sync.Mutex
	flaky     bool
	calls     int
	txns      []*logstorepb.Transaction
	next      map[string]uint64
	producers map[string]producerEntry // by id
	names     map[string]string        // producer name -> id
}

type producerEntry struct {
	epoch uint64
	seq   uint64
	resp  *logstorepb.AppendResponse
}

func newFakeLog() *fakeLog {
	return &fakeLog{next: map[string]uint64{}, producers: map[string]producerEntry{}, names: map[string]string{}}
}

func (f *fakeLog) InitProducer(_ context.Context, name string) (string, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.names[name]
	if !ok {
		id = fmt.Sprint(len(f.names) + 1)
		f.names[name] = id
	}
	p := producerEntry{epoch: f.producers[id].epoch + 1}
	f.producers[id] = p
	return id, p.epoch, nil
}

func (f *fakeLog) Append(_ context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if p, ok := f.producers[req.ProducerId]; !ok || req.ProducerEpoch != p.epoch {
		return nil, status.Errorf(codes.FailedPrecondition, "producer %q epoch %d is not registered", req.ProducerId, req.ProducerEpoch)
	}
	if p := f.producers[req.ProducerId]; req.Sequence == p.seq {
		return p.resp, nil
	}
	if want := f.producers[req.ProducerId].seq + 1; req.Sequence != want {
		return nil, status.Errorf(codes.FailedPrecondition, "sequence %d, want %d", req.Sequence, want)
	}
	t := &logstorepb.Transaction{Lsn: uint64(len(f.txns)) + 1}
	resp := &logstorepb.AppendResponse{Lsn: t.Lsn}
	for _, s := range req.Slices {
		t.Slices = append(t.Slices, &logstorepb.TxnSlice{Topic: s.Topic, FirstOffset: f.next[s.Topic], Messages: s.Messages})
		resp.Slices = append(resp.Slices, &logstorepb.SliceResult{Topic: s.Topic, FirstOffset: f.next[s.Topic]})
		f.next[s.Topic] += uint64(len(s.Messages))
	}
	f.txns = append(f.txns, t)
	f.producers[req.ProducerId] = producerEntry{epoch: req.ProducerEpoch, seq: req.Sequence, resp: resp}
	if f.flaky && f.calls%3 == 0 {
		return nil, status.Error(codes.Unavailable, "leadership lost")
	}
	return resp, nil
}

// deliveries turns the log into what a LogPlayer would send target topics.
func deliveries(txns []*logstorepb.Transaction, topics ...string) []*targetpb.Delivery {
	want := map[string]bool{}
	for _, t := range topics {
		want[t] = true
	}
	var out []*targetpb.Delivery
	for _, t := range txns {
		d := &targetpb.Delivery{Lsn: t.Lsn}
		for _, s := range t.Slices {
			if want[s.Topic] {
				d.Slices = append(d.Slices, s)
			}
		}
		out = append(out, d)
	}
	return out
}

// applyShard applies deliveries to a key-value map as the shard does.
func applyShard(t *testing.T, kv map[string][]byte, ds []*targetpb.Delivery) {
	t.Helper()
	for _, d := range ds {
		if len(d.Slices) == 0 {
			continue
		}
		if err := shard.ModelApply(kv, []string{d.Slices[0].Topic}, d.Slices); err != nil {
			t.Fatalf("lsn %d: %v", d.Lsn, err)
		}
	}
}

func runFake(t *testing.T, flaky bool) (*fakeLog, *Result) {
	t.Helper()
	f := newFakeLog()
	f.flaky = flaky
	res, err := Run(context.Background(), Config{
		Appender: f, Clients: 3, Duration: 30 * time.Millisecond, Run: "beef", Seed: 7,
		RetryMax: time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Committed == 0 {
		t.Fatal("nothing committed")
	}
	return f, res
}

func buildModel(t *testing.T, txns []*logstorepb.Transaction) *Model {
	t.Helper()
	m := NewModel()
	for _, tx := range txns {
		if err := m.Apply(tx); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestRunRetriesWithoutWritingTwice(t *testing.T) {
	f, res := runFake(t, true)
	if res.Retries == 0 {
		t.Fatal("the flaky log forced no retry")
	}
	if res.Committed != len(f.txns) {
		t.Fatalf("acknowledged %d, log has %d", res.Committed, len(f.txns))
	}
	m := buildModel(t, f.txns)
	if m.LogDuplicates() != 0 {
		t.Fatalf("log duplicates = %d", m.LogDuplicates())
	}
	for lsn := range res.Starts {
		if lsn == 0 || lsn > m.LastLSN() {
			t.Fatalf("acknowledged lsn %d outside the log 1..%d", lsn, m.LastLSN())
		}
	}
	if len(res.Acked) != res.Committed || m.AckedNotInLog(res.Acked) != 0 {
		t.Fatalf("%d acked, %d not in the log", len(res.Acked), m.AckedNotInLog(res.Acked))
	}
	// An acknowledgement naming the wrong LSN is caught.
	lying := map[uint64]string{}
	for lsn, id := range res.Acked {
		lying[lsn+1] = id
		break
	}
	if m.AckedNotInLog(lying) != 1 {
		t.Fatal("an ack at the wrong LSN went unnoticed")
	}
}

func TestTransactionShape(t *testing.T) {
	g := NewGenerator("beef", 0, 3, 1)
	for range 200 {
		req := g.Next()
		shards := 0
		seen := map[string]bool{}
		for _, s := range req.Slices {
			if seen[s.Topic] {
				t.Fatalf("topic %s twice", s.Topic)
			}
			seen[s.Topic] = true
			if s.Topic != OrdersTopic && s.Topic != InventoryTopic {
				shards++
			}
		}
		if shards < 2 || shards > 3 || !seen[OrdersTopic] || !seen[InventoryTopic] {
			t.Fatalf("txn topics %v", seen)
		}
	}
}

func TestAuditCountsDuplicatesAndMissing(t *testing.T) {
	f, _ := runFake(t, false)
	m := buildModel(t, f.txns)
	subs := map[string][]string{"shard-0": {"shard-0"}, "events": {OrdersTopic, InventoryTopic}}
	last := m.LastLSN()
	ok := NewRecorder(nil)
	ok.Applied("shard-0", deliveries(f.txns, "shard-0"))
	ok.Applied("events", deliveries(f.txns, OrdersTopic, InventoryTopic))
	for _, a := range ok.Audit(m, subs, 0, last) {
		if a.Duplicates != 0 || a.Missing != 0 || a.Delivered != a.Expected || a.Expected == 0 {
			t.Fatalf("exact delivery audited as %+v", a)
		}
	}

	// shard-0 gets one transaction twice and loses the last with data;
	// events lose nothing.
	bad := NewRecorder(nil)
	ds := deliveries(f.txns, "shard-0")
	var withData []*targetpb.Delivery
	for _, d := range ds {
		if len(d.Slices) > 0 {
			withData = append(withData, d)
		}
	}
	if len(withData) < 3 {
		t.Fatalf("only %d shard-0 deliveries", len(withData))
	}
	dup, lost := withData[0], withData[len(withData)-1]
	bad.Applied("shard-0", withData[:len(withData)-1])
	bad.Applied("shard-0", []*targetpb.Delivery{dup})
	bad.Applied("events", deliveries(f.txns, OrdersTopic, InventoryTopic))
	got := map[string]TargetAudit{}
	for _, a := range bad.Audit(m, subs, 0, last) {
		got[a.Target] = a
	}
	if a := got["shard-0"]; a.Duplicates != len(dup.Slices[0].Messages) || a.Missing != len(lost.Slices[0].Messages) {
		t.Fatalf("shard-0 audit %+v, want %d duplicates and %d missing", a, len(dup.Slices[0].Messages), len(lost.Slices[0].Messages))
	}
	if a := got["events"]; a.Duplicates != 0 || a.Missing != 0 {
		t.Fatalf("events audit %+v", a)
	}
	// A range that excludes the lost transaction sees nothing missing.
	for _, a := range bad.Audit(m, subs, 0, lost.Lsn-1) {
		if a.Missing != 0 {
			t.Fatalf("range before the loss: %+v", a)
		}
	}
}

func TestCompareShard(t *testing.T) {
	f, _ := runFake(t, false)
	m := buildModel(t, f.txns)
	ds := deliveries(f.txns, "shard-1")
	kv := map[string][]byte{}
	applyShard(t, kv, ds)
	if d := m.CompareShard("shard-1", kv); !d.OK() || d.Keys != len(kv) {
		t.Fatalf("exact state diff %+v", d)
	}
	// Re-applying an old transaction late changes a hot key or resurrects
	// a deleted one unless it only wrote its own keys: find one that shows.
	found := false
	for _, d := range ds {
		if len(d.Slices) == 0 {
			continue
		}
		again := map[string][]byte{}
		applyShard(t, again, ds)
		applyShard(t, again, []*targetpb.Delivery{d})
		if !m.CompareShard("shard-1", again).OK() {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("no late re-apply changed the state: hot keys are not exercised")
	}
	delete(kv, string(firstUniqueKey(t, ds)))
	kv["zzz"] = []byte("x")
	if d := m.CompareShard("shard-1", kv); d.Missing != 1 || d.Unexpected != 1 {
		t.Fatalf("diff %+v, want 1 missing and 1 unexpected", d)
	}
}

func firstUniqueKey(t *testing.T, ds []*targetpb.Delivery) []byte {
	t.Helper()
	for _, d := range ds {
		for _, s := range d.Slices {
			var m shardpb.Mutation
			if err := proto.Unmarshal(s.Messages[0].Value, &m); err != nil {
				t.Fatal(err)
			}
			return m.Key
		}
	}
	t.Fatal("no delivery with data")
	return nil
}

func TestModelRejectsBrokenLog(t *testing.T) {
	m := NewModel()
	if err := m.Apply(&logstorepb.Transaction{Lsn: 2}); err == nil {
		t.Fatal("LSN gap accepted")
	}
	m = NewModel()
	if err := m.Apply(&logstorepb.Transaction{Lsn: 1, Slices: []*logstorepb.TxnSlice{{Topic: "orders", FirstOffset: 3}}}); err == nil {
		t.Fatal("offset gap accepted")
	}
	m = NewModel()
	bad := &logstorepb.Transaction{Lsn: 1, Slices: []*logstorepb.TxnSlice{{Topic: "shard-0", Messages: []*logstorepb.Message{{Value: []byte{0xff}}}}}}
	if err := m.Apply(bad); err == nil {
		t.Fatal("malformed mutation accepted")
	}
}

func TestRecordingEventStore(t *testing.T) {
	f, _ := runFake(t, false)
	m := buildModel(t, f.txns)
	rec := NewRecorder(nil)
	ev := &EventStore{}
	st := rec.Record("events", ev)
	ds := deliveries(f.txns, OrdersTopic, InventoryTopic)
	if err := st.Apply(ds, target.State{AppliedLSN: types.LSN(ds[len(ds)-1].Lsn)}); err != nil {
		t.Fatal(err)
	}
	if ev.Events() != 2*len(f.txns) {
		t.Fatalf("events = %d, want %d", ev.Events(), 2*len(f.txns))
	}
	if got, _ := st.State(); got.AppliedLSN != types.LSN(m.LastLSN()) {
		t.Fatalf("applied lsn %d, want %d", got.AppliedLSN, m.LastLSN())
	}
	if p := rec.Progress()["events"]; p.Messages != ev.Events() || p.LastLSN != m.LastLSN() {
		t.Fatalf("recorded %+v", p)
	}

	// A failed apply of the inner store is not recorded.
	failing := rec.Record("failing", failStore{})
	if err := failing.Apply(ds, target.State{AppliedLSN: types.LSN(ds[len(ds)-1].Lsn)}); err == nil {
		t.Fatal("failStore applied")
	}
	if p, ok := rec.Progress()["failing"]; ok {
		t.Fatalf("a failed apply was recorded: %+v", p)
	}
}

// failStore refuses every Apply.
type failStore struct{}

func (failStore) State() (target.State, error) { return target.State{}, nil }
func (failStore) Apply(ds []*targetpb.Delivery, _ target.State) error {
	return target.Permanent(types.LSN(ds[0].Lsn), errors.New("refused"))
}

func TestApplyLatencies(t *testing.T) {
	f, _ := runFake(t, false)
	m := buildModel(t, f.txns)
	base := time.Unix(1000, 0)
	clock := base
	rec := NewRecorder(func() time.Time { return clock })
	// Every append started at base + lsn µs; shard-0's applied LSN reaches
	// the middle of the log at base+1s and the end at base+2s.
	starts := map[uint64]time.Time{}
	for lsn := uint64(1); lsn <= m.LastLSN(); lsn++ {
		starts[lsn] = base.Add(time.Duration(lsn) * time.Microsecond)
	}
	mid := m.LastLSN() / 2
	clock = base.Add(time.Second)
	rec.Advanced("shard-0", mid)
	clock = base.Add(2 * time.Second)
	rec.Advanced("shard-0", m.LastLSN())
	rec.Advanced("shard-0", mid) // going back is ignored
	subs := map[string][]string{"shard-0": {"shard-0"}}
	lat := rec.ApplyLatencies(m, subs, 0, m.LastLSN(), starts)
	if want := m.Messages("shard-0", 0, m.LastLSN()); len(lat) == 0 || len(lat) > want {
		t.Fatalf("%d latencies for %d shard-0 messages", len(lat), want)
	}
	for _, l := range lat {
		if l <= 0 || l > 2*time.Second {
			t.Fatalf("latency %v outside (0, 2s]", l)
		}
	}
	if p := rec.Progress()["shard-0"]; p.LastLSN != m.LastLSN() {
		t.Fatalf("progress %+v", p)
	}
	// A target that never advanced has no latencies.
	if lat := rec.ApplyLatencies(m, map[string][]string{"shard-1": {"shard-1"}}, 0, m.LastLSN(), starts); len(lat) != 0 {
		t.Fatalf("latencies without advances: %v", lat)
	}
}

// fakeShard serves a fixed state through the Shard API, truncating every
// Scan after scanLimit items.
type fakeShard struct {
	kv        map[string][]byte
	lsn       uint64
	scanLimit int
	scans     int
}

func (f *fakeShard) Get(_ context.Context, req *shardpb.GetRequest, _ ...grpc.CallOption) (*shardpb.GetResponse, error) {
	v, ok := f.kv[string(req.Key)]
	return &shardpb.GetResponse{Found: ok, Value: v, AppliedLsn: f.lsn}, nil
}

func (f *fakeShard) Scan(_ context.Context, req *shardpb.ScanRequest, _ ...grpc.CallOption) (*shardpb.ScanResponse, error) {
	f.scans++
	var keys []string
	for k := range f.kv {
		if strings.HasPrefix(k, string(req.Prefix)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	resp := &shardpb.ScanResponse{AppliedLsn: f.lsn}
	if len(keys) > f.scanLimit {
		keys, resp.Truncated = keys[:f.scanLimit], true
	}
	for _, k := range keys {
		resp.Items = append(resp.Items, &shardpb.KeyValue{Key: []byte(k), Value: f.kv[k]})
	}
	return resp, nil
}

func (f *fakeShard) WaitApplied(_ context.Context, _ *shardpb.WaitAppliedRequest, _ ...grpc.CallOption) (*shardpb.WaitAppliedResponse, error) {
	return &shardpb.WaitAppliedResponse{AppliedLsn: f.lsn}, nil
}

func TestScanAllSplitsTruncatedScans(t *testing.T) {
	f, _ := runFake(t, false)
	m := buildModel(t, f.txns)
	want := m.State("shard-2")
	kv := map[string][]byte{"user/1": []byte("alice")} // a key of another shape
	for k, v := range want {
		kv[k] = v
	}
	fs := &fakeShard{kv: kv, lsn: m.LastLSN(), scanLimit: 20}
	got, lsn, err := ScanAll(context.Background(), fs)
	if err != nil || lsn != m.LastLSN() {
		t.Fatalf("ScanAll: lsn %d, %v", lsn, err)
	}
	if fs.scans < 3 || len(got) != len(want) {
		t.Fatalf("%d scans found %d keys, want %d workload keys", fs.scans, len(got), len(want))
	}
	if d := m.CompareShard("shard-2", got); !d.OK() {
		t.Fatalf("diff %+v", d)
	}
	// The model also expects user/1: ScanAll cannot see it in a split
	// scan, getMissing fetches it.
	want["user/1"] = []byte("alice")
	if err := getMissing(context.Background(), fs, want, got); err != nil || string(got["user/1"]) != "alice" {
		t.Fatalf("getMissing: %v, %q", err, got["user/1"])
	}
}
