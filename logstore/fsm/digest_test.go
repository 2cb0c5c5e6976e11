package fsm

import (
	"encoding/hex"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// reuseVariants are requests that differ from regAppend(p, seq, "v") in
// one part of their content each: a producer sending one of them under a
// sequence already applied reused it for other data.
func reuseVariants(p *logstorepb.InitProducerResponse, seq uint64) map[string]*logstorepb.Command {
	mk := func(change func(r *logstorepb.AppendRequest)) *logstorepb.Command {
		c := regAppend(p, seq, "v")
		change(c.GetAppend())
		return c
	}
	return map[string]*logstorepb.Command{
		"other value":  regAppend(p, seq, "w"),
		"key added":    mk(func(r *logstorepb.AppendRequest) { r.Slices[0].Messages[0].Key = []byte("k") }),
		"header added": mk(func(r *logstorepb.AppendRequest) { r.Slices[0].Messages[0].Headers = []*logstorepb.Header{{Key: "h"}} }),
		"other topic":  mk(func(r *logstorepb.AppendRequest) { r.Slices[0].Topic = "u" }),
		"second message": mk(func(r *logstorepb.AppendRequest) {
			r.Slices[0].Messages = append(r.Slices[0].Messages, &logstorepb.Message{})
		}),
		"condition added": mk(func(r *logstorepb.AppendRequest) {
			r.Conditions = []*logstorepb.Condition{{Topic: "t", ExpectedNextOffset: 0}}
		}),
		"offset commit": mk(func(r *logstorepb.AppendRequest) {
			r.OffsetCommits = []*logstorepb.OffsetCommit{{Group: "g", Topic: "t", Offset: 1}}
		}),
	}
}

// TestSequenceReusedRefused is the last point of defect 7 of issue #12:
// on the main of 01:00 UTC a retry of a remembered sequence with other
// content answered `duplicate` with the first result (the producer's new
// data silently dropped, reported as written). Now it is SEQUENCE_REUSED,
// writes nothing and leaves the row as it was: the exact retry still gets
// the first result, the next sequence is still the next one. This holds
// for every remembered sequence of the window, and for a remembered
// failure too.
func TestSequenceReusedRefused(t *testing.T) {
	s := newProducerSM(t, nil)
	p := s.init("p")
	lsns := map[uint64]uint64{}
	for seq := uint64(1); seq <= 3; seq++ {
		lsns[seq] = lsnOf(t, s.apply(regAppend(p, seq, "v")))
	}
	for _, seq := range []uint64{3, 1} { // the last one, and an older one of the window
		for what, c := range reuseVariants(p, seq) {
			d := wantCode(t, what, s.apply(c), logstorepb.ErrorCode_SEQUENCE_REUSED)
			if d.ExpectedSequence != 4 {
				t.Fatalf("%s: expected_sequence %d, want 4", what, d.ExpectedSequence)
			}
		}
		if r := s.apply(regAppend(p, seq, "v")); lsnOf(t, r) != lsns[seq] || !r.Resp.(*logstorepb.AppendResponse).Duplicate {
			t.Fatalf("exact retry of %d after refusals: %v, want lsn %d duplicate", seq, r.Resp, lsns[seq])
		}
	}
	if len(s.l.txns) != 3 || s.copies("w") != 0 {
		t.Fatalf("log holds %d txns (%d of the reused content), want 3 (0)", len(s.l.txns), s.copies("w"))
	}
	if got := lsnOf(t, s.apply(regAppend(p, 4, "v"))); got != lsns[3]+1 {
		t.Fatalf("next sequence after refusals: lsn %d, want %d", got, lsns[3]+1)
	}

	// A remembered failure: the same content gets the stored failure, other
	// content SEQUENCE_REUSED (not the stored CONDITION_FAILED, which would
	// be about a request the producer did not send this time).
	cond := regAppend(p, 5, "c")
	cond.GetAppend().Conditions = []*logstorepb.Condition{{Topic: "t", ExpectedNextOffset: 99}}
	wantCode(t, "condition", s.apply(cond), logstorepb.ErrorCode_CONDITION_FAILED)
	wantCode(t, "condition retry", s.apply(cond), logstorepb.ErrorCode_CONDITION_FAILED)
	wantCode(t, "condition sequence reused", s.apply(regAppend(p, 5, "c")), logstorepb.ErrorCode_SEQUENCE_REUSED)
}

// TestLegacySequenceReused: an unregistered producer's last sequence sent
// again with other content is SEQUENCE_REUSED too once the cluster runs at
// version 3 (the digest is stored and compared from then on), and
// `duplicate` as before below it (an older replica would answer so, and
// the row must be the same on every replica).
func TestLegacySequenceReused(t *testing.T) {
	s := newProducerSM(t, nil)
	first := lsnOf(t, s.apply(producerAppend("legacy", 1)))
	other := producerAppend("legacy", 1)
	other.GetAppend().Slices[0].Messages[0].Value = []byte("other")
	wantCode(t, "legacy reuse at version 3", s.apply(other), logstorepb.ErrorCode_SEQUENCE_REUSED)
	if r := s.apply(producerAppend("legacy", 1)); lsnOf(t, r) != first || !r.Resp.(*logstorepb.AppendResponse).Duplicate {
		t.Fatalf("exact legacy retry: %v", r.Resp)
	}
	if len(s.l.txns) != 1 {
		t.Fatalf("%d txns, want 1", len(s.l.txns))
	}

	m, l := newTestSM() // version 1: no digest kept, a retry is a duplicate whatever its content
	m.Apply(1, &logstorepb.Entry{TimestampUnixNano: 1, Commands: []*logstorepb.Command{producerAppend("legacy", 1)}})
	if d := m.State().ToProto().Producers[0].Digest; len(d) != 0 {
		t.Fatalf("digest %x kept below version 3", d)
	}
	r := m.Apply(2, &logstorepb.Entry{TimestampUnixNano: 2, Commands: []*logstorepb.Command{other}})[0]
	if r.Err != nil || !r.Resp.(*logstorepb.AppendResponse).Duplicate || len(l.txns) != 1 {
		t.Fatalf("legacy reuse at version 1: %v %v, want duplicate", r.Resp, r.Err)
	}
}

// TestPreDigestRowsAnswerDuplicate: rows restored from a snapshot written
// before the digest existed (no digest) answer a retry of a remembered
// sequence as a duplicate whatever its content (nothing to compare with);
// the next sequence applied stores a digest and is checked from then on.
func TestPreDigestRowsAnswerDuplicate(t *testing.T) {
	s := newProducerSM(t, nil)
	p := s.init("p")
	first := lsnOf(t, s.apply(regAppend(p, 1, "v")))
	lsnOf(t, s.apply(producerAppend("legacy", 1)))
	old := s.m.State().ToProto()
	for _, r := range old.RegisteredProducers {
		for _, res := range r.Results {
			res.Digest = nil
		}
	}
	for _, r := range old.Producers {
		r.Digest = nil
	}
	st, err := StateFromProto(old)
	if err != nil {
		t.Fatal(err)
	}
	r := &producerSM{t: t, m: NewMachine(st, s.l), l: s.l, idx: s.idx, ts: s.ts}
	if res := r.apply(regAppend(p, 1, "w")); lsnOf(t, res) != first || !res.Resp.(*logstorepb.AppendResponse).Duplicate {
		t.Fatalf("pre-digest registered row: %v, want the first result", res.Resp)
	}
	legacyOther := producerAppend("legacy", 1)
	legacyOther.GetAppend().Slices[0].Messages[0].Value = []byte("other")
	if res := r.apply(legacyOther); res.Err != nil || !res.Resp.(*logstorepb.AppendResponse).Duplicate {
		t.Fatalf("pre-digest legacy row: %v %v, want duplicate", res.Resp, res.Err)
	}
	lsnOf(t, r.apply(regAppend(p, 2, "v")))
	wantCode(t, "sequence applied after the restore", r.apply(regAppend(p, 2, "w")), logstorepb.ErrorCode_SEQUENCE_REUSED)
}

// TestRequestDigest pins what the digest covers: the content (slices,
// messages with key, value and headers, conditions, offset commits, in
// order), not the producer fields; field boundaries are unambiguous; and
// its bytes are fixed (a golden value: changing the encoding changes what
// apply answers, so it would need a cluster version).
func TestRequestDigest(t *testing.T) {
	base := func() *logstorepb.AppendRequest {
		return &logstorepb.AppendRequest{
			Slices: []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{{
				Value: []byte("v"), Key: []byte("k"), Headers: []*logstorepb.Header{{Key: "h", Value: []byte("x")}},
			}}}},
			Conditions:    []*logstorepb.Condition{{Topic: "t", ExpectedNextOffset: 3, Group: "g"}},
			OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g", Topic: "t", Offset: 4}},
			ProducerId:    "1", ProducerEpoch: 1, Sequence: 7,
		}
	}
	want := RequestDigest(base())
	if len(want) != 32 {
		t.Fatalf("digest of %d bytes", len(want))
	}
	const golden = "c154d7dd46eba435d26f362ac9b5172f3235fb6da5ae2400117775929e6322cf" // also computed by hand from the encoding (python hashlib)
	if got := hex.EncodeToString(want); got != golden {
		t.Errorf("digest %s, golden %s", got, golden)
	}
	same := base()
	same.ProducerId, same.ProducerEpoch, same.Sequence = "9", 4, 1
	same.Slices[0].Messages[0].Headers[0].Value = append([]byte(nil), 'x')
	if string(RequestDigest(same)) != string(want) {
		t.Error("producer fields changed the digest")
	}
	empty := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{{Value: []byte{}}}}}}
	absent := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "t", Messages: []*logstorepb.Message{{}}}}}
	if string(RequestDigest(empty)) != string(RequestDigest(absent)) {
		t.Error("an empty value and an absent one (the same on the wire) digest differently")
	}
	changes := map[string]func(r *logstorepb.AppendRequest){
		"topic boundary": func(r *logstorepb.AppendRequest) {
			r.Slices[0].Topic, r.Slices[0].Messages[0].Value = "tv", nil // "t"+"v" vs "tv"+""
		},
		"key/value swapped": func(r *logstorepb.AppendRequest) {
			m := r.Slices[0].Messages[0]
			m.Key, m.Value = m.Value, m.Key
		},
		"header value": func(r *logstorepb.AppendRequest) { r.Slices[0].Messages[0].Headers[0].Value = []byte("y") },
		"no header":    func(r *logstorepb.AppendRequest) { r.Slices[0].Messages[0].Headers = nil },
		"condition offset": func(r *logstorepb.AppendRequest) {
			r.Conditions[0].ExpectedNextOffset = 4
		},
		"condition group": func(r *logstorepb.AppendRequest) { r.Conditions[0].Group = "" },
		"commit offset":   func(r *logstorepb.AppendRequest) { r.OffsetCommits[0].Offset = 5 },
		"no commit":       func(r *logstorepb.AppendRequest) { r.OffsetCommits = nil },
		"commit as condition": func(r *logstorepb.AppendRequest) {
			r.Conditions = append(r.Conditions, &logstorepb.Condition{Topic: "t", ExpectedNextOffset: 4, Group: "g"})
			r.OffsetCommits = nil
		},
		"second slice": func(r *logstorepb.AppendRequest) {
			r.Slices = append(r.Slices, &logstorepb.Slice{Topic: "u"})
		},
	}
	for what, change := range changes {
		r := base()
		change(r)
		if string(RequestDigest(r)) == string(want) {
			t.Errorf("%s: same digest", what)
		}
	}
}

// BenchmarkRequestDigest: the digest's cost in apply, per request size
// (b.SetBytes: MB/s of message bytes).
func BenchmarkRequestDigest(b *testing.B) {
	for _, c := range []struct {
		name      string
		msgs, len int
	}{{"1x100B", 1, 100}, {"100x1KiB", 100, 1 << 10}, {"4x1MiB", 4, 1 << 20}} {
		req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders"}}}
		for range c.msgs {
			req.Slices[0].Messages = append(req.Slices[0].Messages, &logstorepb.Message{Key: []byte("key"), Value: make([]byte, c.len)})
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(c.msgs * c.len))
			for b.Loop() {
				RequestDigest(req)
			}
		})
	}
}
