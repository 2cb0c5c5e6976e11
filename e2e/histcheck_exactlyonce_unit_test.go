package e2e

import (
	"maps"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
)

// putSlice is a slice of topic at offset writing key=value.
func putSlice(topic string, offset uint64, key, value string) *logstorepb.TxnSlice {
	return &logstorepb.TxnSlice{Topic: topic, FirstOffset: offset, Messages: []*logstorepb.Message{
		{Key: []byte("id"), Value: shard.EncodePut([]byte(key), []byte(value))},
	}}
}

// testLog: lsn 1 writes s1 and s2, lsn 2 s1 again, lsn 3 only s2, lsn 4 s1.
func testLog() []*logstorepb.Transaction {
	return []*logstorepb.Transaction{
		{Lsn: 1, Slices: []*logstorepb.TxnSlice{putSlice("s1", 0, "k1", "v1"), putSlice("s2", 0, "k2", "v1")}},
		{Lsn: 2, Slices: []*logstorepb.TxnSlice{putSlice("s1", 1, "k1", "v2")}},
		{Lsn: 3, Slices: []*logstorepb.TxnSlice{putSlice("s2", 1, "k2", "v2")}},
		{Lsn: 4, Slices: []*logstorepb.TxnSlice{putSlice("s1", 2, "k3", "v1")}},
	}
}

// deliveryAt is the log's lsn cut to s1, as the LogPlayer would deliver it.
func deliveryAt(log []*logstorepb.Transaction, lsn uint64) *targetpb.Delivery {
	d := &targetpb.Delivery{Lsn: lsn}
	for _, s := range log[lsn-1].Slices {
		if s.Topic == "s1" {
			d.Slices = append(d.Slices, s)
		}
	}
	return d
}

// goodTarget is s1 having applied the whole log exactly once (lsn 3 as a
// progress marker).
func goodTarget(log []*logstorepb.Transaction) histTarget {
	return histTarget{
		ID: "s1", Topics: []string{"s1"}, AppliedLSN: 4,
		NextOffsets: map[string]uint64{"s1": 3},
		Applied:     []*targetpb.Delivery{deliveryAt(log, 1), deliveryAt(log, 2), {Lsn: 3}, deliveryAt(log, 4)},
		State:       map[string][]byte{"k1": []byte("v2"), "k3": []byte("v1")},
	}
}

func TestTargetViolations(t *testing.T) {
	log := testLog()
	if v := targetViolations(log, shard.ModelApply, []histTarget{goodTarget(log)})["s1"]; !v.OK() {
		t.Fatalf("exactly once reported as %v", v.List)
	}
	unrecorded := goodTarget(log)
	unrecorded.Applied, unrecorded.NextOffsets = nil, nil
	if v := targetViolations(log, shard.ModelApply, []histTarget{unrecorded})["s1"]; !v.OK() {
		t.Fatalf("final state only: %v", v.List)
	}

	for name, c := range map[string]struct {
		break_ func(*histTarget)
		want   string
	}{
		"lsn applied twice": {func(tg *histTarget) {
			tg.Applied = append(tg.Applied[:2], append([]*targetpb.Delivery{deliveryAt(log, 2)}, tg.Applied[2:]...)...)
		}, "lsn 2 applied twice"},
		"lsn lost": {func(tg *histTarget) {
			tg.Applied = append(tg.Applied[:1], tg.Applied[2:]...)
			tg.State["k1"] = []byte("v1")
			tg.NextOffsets["s1"] = 2
		}, "lsn 2 has data for its topics and was never applied: lost"},
		"applied out of order": {func(tg *histTarget) {
			tg.Applied[0], tg.Applied[1] = tg.Applied[1], tg.Applied[0]
		}, "lsn 1 applied after lsn 2"},
		"other data at an lsn": {func(tg *histTarget) {
			tg.Applied[1] = &targetpb.Delivery{Lsn: 2, Slices: []*logstorepb.TxnSlice{putSlice("s1", 1, "k1", "other")}}
		}, "lsn 2: applied 1 slices that differ"},
		"a write applied again after a later one": {func(tg *histTarget) {
			tg.State["k1"] = []byte("v1")
		}, `key "k1" is "v1", the log leaves "v2"`},
		"a key the log never wrote": {func(tg *histTarget) {
			tg.State["k9"] = []byte("x")
		}, `key "k9" is "x", the log leaves no such key`},
		"durable offset ahead": {func(tg *histTarget) {
			tg.NextOffsets["s1"] = 4
		}, "topic s1: durable next offset 4, the log has 3"},
		"applied beyond the log": {func(tg *histTarget) {
			tg.AppliedLSN = 9
		}, "applied lsn 9 beyond the log's last lsn 4"},
	} {
		t.Run(name, func(t *testing.T) {
			tg := goodTarget(log)
			tg.State, tg.NextOffsets = maps.Clone(tg.State), maps.Clone(tg.NextOffsets)
			c.break_(&tg)
			v := targetViolations(log, shard.ModelApply, []histTarget{tg})["s1"]
			if v.OK() || !strings.Contains(strings.Join(v.List, "\n"), c.want) {
				t.Fatalf("got %v, want a violation %q", v.List, c.want)
			}
			t.Log(v.List)
		})
	}
}

func TestAckViolations(t *testing.T) {
	log := []*logstorepb.Transaction{{Lsn: 1}, {Lsn: 2}, {Lsn: 3}, {Lsn: 4}}
	ids := []string{"", "a", "b", "", "c"} // ids[lsn]; lsn 3 was not written by the workload
	id := func(t *logstorepb.Transaction) string { return ids[t.Lsn] }
	if v := ackViolations(logIDs(log, id), []histAck{{"a", 1}, {"b", 2}, {"c", 4}}); !v.OK() {
		t.Fatalf("acks reported as %v", v.List)
	}
	for name, c := range map[string]struct {
		acks []histAck
		ids  []string
		want string
	}{
		"acknowledged, then lost":         {[]histAck{{"a", 1}, {"d", 5}}, nil, "txn d acknowledged at lsn 5, outside the log [1, 4]: lost"},
		"acknowledged, another txn there": {[]histAck{{"a", 1}, {"d", 3}}, nil, `txn d acknowledged at lsn 3, the log has txn "" there`},
		"in the log twice":                {[]histAck{{"a", 1}}, []string{"", "a", "b", "a", "c"}, "txn a is 2 times in the log"},
		"one lsn acknowledged twice":      {[]histAck{{"a", 1}, {"b", 1}}, nil, "lsn 1 acknowledged twice: to txn a and to txn b"},
	} {
		t.Run(name, func(t *testing.T) {
			if c.ids != nil {
				old := ids
				ids = c.ids
				defer func() { ids = old }()
			}
			v := ackViolations(logIDs(log, id), c.acks)
			if v.OK() || !strings.Contains(strings.Join(v.List, "\n"), c.want) {
				t.Fatalf("got %v, want a violation %q", v.List, c.want)
			}
		})
	}
}
