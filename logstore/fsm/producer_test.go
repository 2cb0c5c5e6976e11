package fsm

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// producerSM is a machine at cluster version 3 applying one command per
// entry with lim, at log time ts (each entry at least 1ns later).
type producerSM struct {
	t   *testing.T
	m   *Machine
	l   *memLog
	lim *logstorepb.ApplyLimits
	idx uint64
	ts  int64
}

func newProducerSM(t *testing.T, lim *logstorepb.ApplyLimits) *producerSM {
	m, l := newTestSM()
	s := &producerSM{t: t, m: m, l: l, lim: lim}
	if r := s.apply(SetClusterVersionCommand(CurrentVersion)); r.Err != nil {
		t.Fatal(r.Err)
	}
	return s
}

func (s *producerSM) apply(c *logstorepb.Command) Result {
	s.idx++
	s.ts++
	return s.m.Apply(s.idx, &logstorepb.Entry{TimestampUnixNano: s.ts, Limits: s.lim, Commands: []*logstorepb.Command{c}})[0]
}

func initCmd(name string) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_InitProducer{InitProducer: &logstorepb.InitProducerRequest{Name: name}}}
}

func (s *producerSM) init(name string) *logstorepb.InitProducerResponse {
	s.t.Helper()
	r := s.apply(initCmd(name))
	if r.Err != nil {
		s.t.Fatalf("init %q: %v", name, r.Err)
	}
	return r.Resp.(*logstorepb.InitProducerResponse)
}

// regAppend is an Append of registered producer p writing value to topic t.
func regAppend(p *logstorepb.InitProducerResponse, seq uint64, value string) *logstorepb.Command {
	return appendCmd(&logstorepb.AppendRequest{
		Slices:     []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte(value)}}}},
		ProducerId: p.ProducerId, ProducerEpoch: p.Epoch, Sequence: seq,
	})
}

// copies counts the messages of topic t with value in the log.
func (s *producerSM) copies(value string) int {
	n := 0
	for _, txn := range s.l.txns {
		for _, sl := range txn.Slices {
			for _, m := range sl.Messages {
				if sl.Topic == "t" && string(m.Value) == value {
					n++
				}
			}
		}
	}
	return n
}

func wantCode(t *testing.T, what string, r Result, code logstorepb.ErrorCode) *logstorepb.ErrorDetail {
	t.Helper()
	if r.Err == nil || apierr.CodeOf(r.Err) != code {
		t.Fatalf("%s: %v (resp %v), want %v", what, r.Err, r.Resp, code)
	}
	return apierr.Detail(r.Err)
}

func lsnOf(t *testing.T, r Result) uint64 {
	t.Helper()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r.Resp.(*logstorepb.AppendResponse).Lsn
}

// TestRetryAfterEvictionNeverWritesTwice is defect 1 of issue #12. Today's
// code (legacy producer ids) fails it: the victim's sequence 1 commits, its
// answer is lost, MaxProducers other producers arrive and evict its row,
// and the retry of sequence 1 is written again at a new LSN and reported as
// success. With registered producers, the others cannot evict a recently
// active row (TABLE_FULL), and once the victim's row is reclaimed after its
// idle expiry the retry gets UNKNOWN_PRODUCER and writes nothing.
func TestRetryAfterEvictionNeverWritesTwice(t *testing.T) {
	s := newProducerSM(t, &logstorepb.ApplyLimits{MaxProducers: 2, ProducerIdleExpiryNanos: int64(time.Hour)})
	victim := s.init("victim")
	first := lsnOf(t, s.apply(regAppend(victim, 1, "v1")))
	s.init("a")
	wantCode(t, "third producer in a table of 2 recently active", s.apply(initCmd("b")), logstorepb.ErrorCode_TABLE_FULL)
	if r := s.apply(regAppend(victim, 1, "v1")); lsnOf(t, r) != first || !r.Resp.(*logstorepb.AppendResponse).Duplicate {
		t.Fatalf("retry while the row is held: %v, want the first result (lsn %d, duplicate)", r.Resp, first)
	}

	s.ts += int64(2 * time.Hour) // both rows idle past the expiry: "b" reclaims the victim's (least recently seen)
	b := s.init("b")
	if b.ProducerId == victim.ProducerId {
		t.Fatalf("id %s handed out twice", b.ProducerId)
	}
	wantCode(t, "retry after the row was reclaimed", s.apply(regAppend(victim, 1, "v1")), logstorepb.ErrorCode_UNKNOWN_PRODUCER)
	if n := s.copies("v1"); n != 1 {
		t.Fatalf("victim's transaction is in the log %d times", n)
	}
	// Registering again gives a new id at epoch 1 (the old row is gone).
	again := s.init("victim")
	if again.ProducerId == victim.ProducerId || again.Epoch != 1 {
		t.Fatalf("re-registration after expiry: %v", again)
	}
}

// An unknown id, or an id that was never handed out, is refused; so is an
// epoch the cluster never issued.
func TestUnknownProducerRefused(t *testing.T) {
	s := newProducerSM(t, nil)
	ghost := &logstorepb.InitProducerResponse{ProducerId: "7", Epoch: 1}
	wantCode(t, "never registered", s.apply(regAppend(ghost, 1, "g")), logstorepb.ErrorCode_UNKNOWN_PRODUCER)
	p := s.init("p")
	future := &logstorepb.InitProducerResponse{ProducerId: p.ProducerId, Epoch: p.Epoch + 1}
	wantCode(t, "epoch never issued", s.apply(regAppend(future, 1, "g")), logstorepb.ErrorCode_UNKNOWN_PRODUCER)
	if len(s.l.txns) != 0 {
		t.Fatalf("refused appends wrote %d txns", len(s.l.txns))
	}
}

// TestZombieFenced: registering a name again bumps the epoch; the old
// instance's Appends (new sequences and retries alike) get PRODUCER_FENCED
// and write nothing; the new instance starts at sequence 1.
func TestZombieFenced(t *testing.T) {
	s := newProducerSM(t, nil)
	old := s.init("orders")
	lsnOf(t, s.apply(regAppend(old, 1, "old-1")))
	cur := s.init("orders")
	if cur.ProducerId != old.ProducerId || cur.Epoch != old.Epoch+1 {
		t.Fatalf("re-registration = %v, want id %s epoch %d", cur, old.ProducerId, old.Epoch+1)
	}
	for _, seq := range []uint64{1, 2} {
		d := wantCode(t, "zombie append", s.apply(regAppend(old, seq, "zombie")), logstorepb.ErrorCode_PRODUCER_FENCED)
		if d.Epoch != cur.Epoch {
			t.Fatalf("fenced detail epoch %d, want %d", d.Epoch, cur.Epoch)
		}
	}
	lsnOf(t, s.apply(regAppend(cur, 1, "new-1")))
	if s.copies("zombie") != 0 || s.copies("new-1") != 1 {
		t.Fatalf("log: zombie %d, new %d", s.copies("zombie"), s.copies("new-1"))
	}
}

// TestWindowOfFive: five sequences in flight; a retry of any of the last
// five gets its stored result (also a stored failure), a gap gets
// SEQUENCE_MISMATCH naming the next sequence, an older one SEQUENCE_TOO_OLD.
func TestWindowOfFive(t *testing.T) {
	s := newProducerSM(t, nil)
	p := s.init("p")
	lsns := map[uint64]uint64{}
	for seq := uint64(1); seq <= 7; seq++ {
		lsns[seq] = lsnOf(t, s.apply(regAppend(p, seq, "m")))
	}
	for seq := uint64(3); seq <= 7; seq++ {
		r := s.apply(regAppend(p, seq, "m"))
		if lsnOf(t, r) != lsns[seq] || !r.Resp.(*logstorepb.AppendResponse).Duplicate {
			t.Fatalf("retry of %d: %v, want lsn %d duplicate", seq, r.Resp, lsns[seq])
		}
	}
	for _, seq := range []uint64{1, 2} {
		if d := wantCode(t, "older than the window", s.apply(regAppend(p, seq, "m")), logstorepb.ErrorCode_SEQUENCE_TOO_OLD); d.ExpectedSequence != 8 {
			t.Fatalf("too old: expected %d, want 8", d.ExpectedSequence)
		}
	}
	if d := wantCode(t, "gap", s.apply(regAppend(p, 10, "m")), logstorepb.ErrorCode_SEQUENCE_MISMATCH); d.ExpectedSequence != 8 {
		t.Fatalf("gap: expected %d, want 8", d.ExpectedSequence)
	}
	if s.copies("m") != 7 {
		t.Fatalf("%d copies, want 7", s.copies("m"))
	}
	// A failed condition is remembered like a result.
	cond := regAppend(p, 8, "c")
	cond.GetAppend().Conditions = []*logstorepb.Condition{{Topic: "t", ExpectedNextOffset: 99}}
	wantCode(t, "condition", s.apply(cond), logstorepb.ErrorCode_CONDITION_FAILED)
	wantCode(t, "condition retry", s.apply(cond), logstorepb.ErrorCode_CONDITION_FAILED)
	lsnOf(t, s.apply(regAppend(p, 9, "m9")))
}

// TestRegisteredProducersSnapshotRoundTrip: rows, windows, epochs and the
// id counter survive MarshalState/UnmarshalState, and the restored machine
// answers exactly as the original.
func TestRegisteredProducersSnapshotRoundTrip(t *testing.T) {
	s := newProducerSM(t, nil)
	a := s.init("a")
	b := s.init("b")
	b = s.init("b")
	for seq := uint64(1); seq <= 6; seq++ {
		lsnOf(t, s.apply(regAppend(a, seq, "a")))
	}
	lsnOf(t, s.apply(regAppend(b, 1, "b")))
	raw, err := MarshalState(s.m.State().ToProto())
	if err != nil {
		t.Fatal(err)
	}
	st, err := UnmarshalState(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw2, _ := MarshalState(st.ToProto())
	if !proto.Equal(s.m.State().ToProto(), st.ToProto()) || string(raw) != string(raw2) {
		t.Fatal("restored state differs")
	}
	r := &producerSM{t: t, m: NewMachine(st, s.l), l: s.l, idx: s.idx, ts: s.ts}
	if res := r.apply(regAppend(a, 6, "a")); !res.Resp.(*logstorepb.AppendResponse).Duplicate {
		t.Fatalf("restored window: %v", res.Resp)
	}
	wantCode(t, "restored window edge", r.apply(regAppend(a, 1, "a")), logstorepb.ErrorCode_SEQUENCE_TOO_OLD)
	wantCode(t, "restored epoch", r.apply(regAppend(&logstorepb.InitProducerResponse{ProducerId: b.ProducerId, Epoch: 1}, 2, "b")), logstorepb.ErrorCode_PRODUCER_FENCED)
	if c := r.init("c"); c.ProducerId != "3" {
		t.Fatalf("restored id counter: new id %s, want 3", c.ProducerId)
	}

	bad := s.m.State().ToProto()
	bad.RegisteredProducers[0].Results[0].Sequence = 99
	if _, err := StateFromProto(bad); err == nil {
		t.Fatal("a window with a wrong sequence was accepted")
	}
}

// TestRegisteredProducersNeedVersion3: on a version-2 cluster InitProducer
// and an Append with producer_epoch are FEATURE_NOT_ENABLED (at the gate
// and in apply), while a legacy producer Append goes on as before.
func TestRegisteredProducersNeedVersion3(t *testing.T) {
	m, l := newTestSM()
	m.Apply(1, &logstorepb.Entry{TimestampUnixNano: 1, Commands: []*logstorepb.Command{SetClusterVersionCommand(2)}})
	reg := regAppend(&logstorepb.InitProducerResponse{ProducerId: "1", Epoch: 1}, 1, "x")
	for _, c := range []*logstorepb.Command{initCmd("p"), reg} {
		if err := Gate(m.State(), c); apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED || apierr.Detail(err).Limit != 3 {
			t.Fatalf("gate %T at version 2: %v", c.Kind, err)
		}
		wantCode(t, "apply at version 2", m.Apply(m.State().LastIndex()+1, &logstorepb.Entry{TimestampUnixNano: 2, Commands: []*logstorepb.Command{c}})[0], logstorepb.ErrorCode_FEATURE_NOT_ENABLED)
	}
	if m.State().RegisteredProducers() != 0 || len(l.txns) != 0 {
		t.Fatal("a refused command changed the state")
	}
	if r := m.Apply(m.State().LastIndex()+1, &logstorepb.Entry{TimestampUnixNano: 3, Commands: []*logstorepb.Command{producerAppend("legacy", 1)}})[0]; r.Err != nil {
		t.Fatalf("legacy producer at version 2: %v", r.Err)
	}
}

// TestRegisteredTableFullAndIdleSweep: a full table of recently active
// rows refuses new names but re-registers known ones; the periodic sweep
// drops idle rows (bounded by expiry as well as by count).
func TestRegisteredTableFullAndIdleSweep(t *testing.T) {
	s := newProducerSM(t, &logstorepb.ApplyLimits{MaxProducers: 3, ProducerIdleExpiryNanos: int64(time.Hour)})
	for _, n := range []string{"a", "b", "c"} {
		s.init(n)
	}
	d := wantCode(t, "fourth name", s.apply(initCmd("d")), logstorepb.ErrorCode_TABLE_FULL)
	if d.Limit != 3 {
		t.Fatalf("limit %d", d.Limit)
	}
	if p := s.init("b"); p.Epoch != 2 {
		t.Fatalf("re-register in a full table: %v", p)
	}
	s.ts += int64(2 * time.Hour)
	s.apply(producerAppend("legacy", 1)) // any entry: the sweep runs
	if n := s.m.State().RegisteredProducers(); n != 0 {
		t.Fatalf("%d rows after the idle sweep", n)
	}
}
