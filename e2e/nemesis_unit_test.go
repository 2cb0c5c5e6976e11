package e2e

import (
	"testing"

	"github.com/logplayer/logplayer/internal/histcheck"
)

// TestOneEffectPerID checks how the nemesis hands retried appends to the
// linearizability checker. The first history is what TestNemesis recorded
// when the client retried an Append inside one call (its first try wrote,
// the second was answered as a duplicate): checked as recorded it failed
// (seed 1, twice in four runs), which was the harness's mistake, not the
// system's. The others are the workload's retries: unknown attempts of a
// transaction that another attempt wrote, or that none acknowledged.
func TestOneEffectPerID(t *testing.T) {
	sl := func(off uint64) []histcheck.Slice {
		return []histcheck.Slice{{Topic: "t", FirstOffset: off, Messages: 1}}
	}
	log := []histcheck.Txn{{LSN: 1, ID: "a", Slices: sl(0)}, {LSN: 2, ID: "b", Slices: sl(1)}, {LSN: 3, ID: "c", Slices: sl(2)}}
	cases := []struct {
		name string
		ops  []histcheck.Op
		// raw: the history as recorded passes the checker.
		raw bool
	}{
		{name: "retried inside one call", ops: []histcheck.Op{
			{Client: 0, Kind: histcheck.KindAppend, Call: 1, Return: 5, ID: "a", Slices: sl(0), Outcome: histcheck.OK, LSN: 1, Duplicate: true},
			{Client: 1, Kind: histcheck.KindAppend, Call: 6, Return: 7, ID: "b", Slices: sl(1), Outcome: histcheck.OK, LSN: 2},
			{Client: 1, Kind: histcheck.KindAppend, Call: 8, Return: 9, ID: "c", Slices: sl(2), Outcome: histcheck.OK, LSN: 3},
		}},
		{name: "unknown attempts, then acknowledged", ops: []histcheck.Op{
			{Client: 0, Kind: histcheck.KindAppend, Call: 1, Return: 2, ID: "a", Slices: sl(0), Outcome: histcheck.Unknown},
			{Client: 0, Kind: histcheck.KindAppend, Call: 3, Return: 4, ID: "a", Slices: sl(0), Outcome: histcheck.Unknown},
			{Client: 0, Kind: histcheck.KindAppend, Call: 5, Return: 6, ID: "a", Slices: sl(0), Outcome: histcheck.OK, LSN: 1},
			{Client: 1, Kind: histcheck.KindAppend, Call: 7, Return: 8, ID: "b", Slices: sl(1), Outcome: histcheck.OK, LSN: 2},
			{Client: 1, Kind: histcheck.KindAppend, Call: 9, Return: 10, ID: "c", Slices: sl(2), Outcome: histcheck.OK, LSN: 3},
		}},
		{name: "unknown attempts only", ops: []histcheck.Op{
			{Client: 0, Kind: histcheck.KindAppend, Call: 1, Return: 2, ID: "a", Slices: sl(0), Outcome: histcheck.OK, LSN: 1},
			{Client: 1, Kind: histcheck.KindAppend, Call: 3, Return: 4, ID: "b", Slices: sl(1), Outcome: histcheck.Unknown},
			{Client: 1, Kind: histcheck.KindAppend, Call: 5, Return: 6, ID: "b", Slices: sl(1), Outcome: histcheck.Unknown},
			{Client: 1, Kind: histcheck.KindAppend, Call: 7, Return: 8, ID: "b", Slices: sl(1), Outcome: histcheck.OK, LSN: 2, Duplicate: true},
			{Client: 0, Kind: histcheck.KindAppend, Call: 9, Return: 10, ID: "c", Slices: sl(2), Outcome: histcheck.OK, LSN: 3},
			{Client: 2, Kind: histcheck.KindRead, Call: 11, Return: 12, From: 1, To: 3, Txns: log},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := histcheck.CheckLinearizable(histcheck.Resolve(tc.ops, log), histcheck.LinearizableConfig{})
			if (err == nil) != tc.raw {
				t.Errorf("as recorded: %v, want linearizable %v", err, tc.raw)
			}
			if _, err := histcheck.CheckLinearizable(histcheck.Resolve(oneEffectPerID(tc.ops), log), histcheck.LinearizableConfig{}); err != nil {
				t.Errorf("with one effect per id: %v", err)
			}
		})
	}
	// It must not hide a transaction written twice: two acknowledged
	// writes of one id stay two writes.
	twice := []histcheck.Op{
		{Client: 0, Kind: histcheck.KindAppend, Call: 1, Return: 2, ID: "a", Slices: sl(0), Outcome: histcheck.OK, LSN: 1},
		{Client: 0, Kind: histcheck.KindAppend, Call: 3, Return: 4, ID: "a", Slices: sl(1), Outcome: histcheck.OK, LSN: 2},
	}
	dup := []histcheck.Txn{{LSN: 1, ID: "a", Slices: sl(0)}, {LSN: 2, ID: "a", Slices: sl(1)}}
	if _, err := histcheck.CheckLinearizable(histcheck.Resolve(oneEffectPerID(twice), dup), histcheck.LinearizableConfig{}); err == nil {
		t.Error("a transaction acknowledged at two LSNs passes")
	}
}
