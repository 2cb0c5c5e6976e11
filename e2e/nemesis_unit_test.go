package e2e

import (
	"errors"
	"slices"
	"testing"
)

// TestOneEffectPerID checks how the nemesis hands retried appends to the
// linearizability checker. The first history is what TestNemesis recorded
// when the client retried an Append inside one call (its first try wrote,
// the second was answered as a duplicate): checked as recorded it failed
// (seed 1, twice in four runs), which was the harness's mistake, not the
// system's. The others are the workload's retries: unknown attempts of a
// transaction that another attempt wrote, or that none acknowledged.
func TestOneEffectPerID(t *testing.T) {
	sl := func(off uint64) []histSlice {
		return []histSlice{{Topic: "t", FirstOffset: off, Messages: 1}}
	}
	log := []histTxn{{LSN: 1, ID: "a", Slices: sl(0)}, {LSN: 2, ID: "b", Slices: sl(1)}, {LSN: 3, ID: "c", Slices: sl(2)}}
	cases := []struct {
		name string
		ops  []histOp
		// raw: the history as recorded passes the checker.
		raw bool
	}{
		{name: "retried inside one call", ops: []histOp{
			{Client: 0, Kind: opAppend, Call: 1, Return: 5, ID: "a", Slices: sl(0), Outcome: outcomeOK, LSN: 1, Duplicate: true},
			{Client: 1, Kind: opAppend, Call: 6, Return: 7, ID: "b", Slices: sl(1), Outcome: outcomeOK, LSN: 2},
			{Client: 1, Kind: opAppend, Call: 8, Return: 9, ID: "c", Slices: sl(2), Outcome: outcomeOK, LSN: 3},
		}},
		{name: "unknown attempts, then acknowledged", ops: []histOp{
			{Client: 0, Kind: opAppend, Call: 1, Return: 2, ID: "a", Slices: sl(0), Outcome: outcomeUnknown},
			{Client: 0, Kind: opAppend, Call: 3, Return: 4, ID: "a", Slices: sl(0), Outcome: outcomeUnknown},
			{Client: 0, Kind: opAppend, Call: 5, Return: 6, ID: "a", Slices: sl(0), Outcome: outcomeOK, LSN: 1},
			{Client: 1, Kind: opAppend, Call: 7, Return: 8, ID: "b", Slices: sl(1), Outcome: outcomeOK, LSN: 2},
			{Client: 1, Kind: opAppend, Call: 9, Return: 10, ID: "c", Slices: sl(2), Outcome: outcomeOK, LSN: 3},
		}},
		{name: "unknown attempts only", ops: []histOp{
			{Client: 0, Kind: opAppend, Call: 1, Return: 2, ID: "a", Slices: sl(0), Outcome: outcomeOK, LSN: 1},
			{Client: 1, Kind: opAppend, Call: 3, Return: 4, ID: "b", Slices: sl(1), Outcome: outcomeUnknown},
			{Client: 1, Kind: opAppend, Call: 5, Return: 6, ID: "b", Slices: sl(1), Outcome: outcomeUnknown},
			{Client: 1, Kind: opAppend, Call: 7, Return: 8, ID: "b", Slices: sl(1), Outcome: outcomeOK, LSN: 2, Duplicate: true},
			{Client: 0, Kind: opAppend, Call: 9, Return: 10, ID: "c", Slices: sl(2), Outcome: outcomeOK, LSN: 3},
			{Client: 2, Kind: opRead, Call: 11, Return: 12, From: 1, To: 3, Txns: log},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkLinearizable(resolveUnknown(tc.ops, log), linearizableConfig{})
			if (err == nil) != tc.raw {
				t.Errorf("as recorded: %v, want linearizable %v", err, tc.raw)
			}
			if _, err := checkLinearizable(resolveUnknown(oneEffectPerID(tc.ops), log), linearizableConfig{}); err != nil {
				t.Errorf("with one effect per id: %v", err)
			}
		})
	}
	// It must not hide a transaction written twice: two acknowledged
	// writes of one id stay two writes.
	twice := []histOp{
		{Client: 0, Kind: opAppend, Call: 1, Return: 2, ID: "a", Slices: sl(0), Outcome: outcomeOK, LSN: 1},
		{Client: 0, Kind: opAppend, Call: 3, Return: 4, ID: "a", Slices: sl(1), Outcome: outcomeOK, LSN: 2},
	}
	dup := []histTxn{{LSN: 1, ID: "a", Slices: sl(0)}, {LSN: 2, ID: "a", Slices: sl(1)}}
	if _, err := checkLinearizable(resolveUnknown(oneEffectPerID(twice), dup), linearizableConfig{}); err == nil {
		t.Error("a transaction acknowledged at two LSNs passes")
	}
}

// TestRefusalAfterUnknownAttempt is the history TestNemesis recorded (seed
// 1, with short call deadlines) before internal/storeconn kept unknown
// outcomes: a producer's Append whose first attempt wrote but whose call
// ended with the last attempt's NOT_LEADER (recorded as failed), then the
// workload's retry answered as a duplicate. Taken at its word, the
// refusal leaves the duplicate answer as the only writer, invoked after a
// later LSN returned: not linearizable. Recorded as the client now
// reports it (unknown), it is.
func TestRefusalAfterUnknownAttempt(t *testing.T) {
	sl := func(off uint64) []histSlice {
		return []histSlice{{Topic: "t", FirstOffset: off, Messages: 1}}
	}
	log := []histTxn{{LSN: 1, ID: "a", Slices: sl(0)}, {LSN: 2, ID: "b", Slices: sl(1)}}
	history := func(first outcome) []histOp {
		return []histOp{
			{Client: 0, Kind: opAppend, Call: 1, Return: 2, ID: "a", Slices: sl(0), Outcome: first},
			{Client: 1, Kind: opAppend, Call: 3, Return: 4, ID: "b", Slices: sl(1), Outcome: outcomeOK, LSN: 2},
			{Client: 0, Kind: opAppend, Call: 5, Return: 6, ID: "a", Slices: sl(0), Outcome: outcomeOK, LSN: 1, Duplicate: true},
		}
	}
	if _, err := checkLinearizable(resolveUnknown(oneEffectPerID(history(outcomeFailed)), log), linearizableConfig{}); !errors.Is(err, errNotLinearizable) {
		t.Errorf("first attempt recorded as refused: %v, want errNotLinearizable", err)
	}
	if _, err := checkLinearizable(resolveUnknown(oneEffectPerID(history(outcomeUnknown)), log), linearizableConfig{}); err != nil {
		t.Errorf("first attempt recorded as unknown: %v", err)
	}
}

// TestCountOutcomes: the summary counts what the clients saw, and how the
// final log settled each unknown outcome.
func TestCountOutcomes(t *testing.T) {
	sl := []histSlice{{Topic: "t", Messages: 1}}
	raw := []histOp{
		{Client: 0, Kind: opAppend, Call: 1, ID: "a", Slices: sl, Outcome: outcomeOK, LSN: 1},
		{Client: 0, Kind: opAppend, Call: 2, ID: "b", Slices: sl, Outcome: outcomeFailed},
		{Client: probeClient, Kind: opAppend, Call: 3, ID: "probe-1", Slices: sl, Outcome: outcomeUnknown},
		{Client: probeClient, Kind: opAppend, Call: 4, ID: "probe-2", Slices: sl, Outcome: outcomeUnknown},
		{Client: readerClient0, Kind: opRead, Call: 5, Return: 6, From: 1, To: 1, Txns: []histTxn{{LSN: 1, ID: "a"}}},
	}
	log := []histTxn{{LSN: 1, ID: "a", Slices: sl}, {LSN: 2, ID: "probe-1", Slices: sl}}
	got := countOutcomes(raw, resolveUnknown(oneEffectPerID(slices.Clone(raw)), log))
	want := outcomeCounts{ok: 1, failed: 1, unknown: 2, probeUnknown: 2, unknownInLog: 1, unknownNotInLog: 1, reads: 1}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
