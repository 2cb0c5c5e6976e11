//go:build race

package logstore_test

// raceEnabled: the race detector slows a seed of TestPowerLossNode from
// 1-15 s to 20-60 s, so its default seed count shrinks (scripts/test.sh -race
// runs it in CI).
const raceEnabled = true
