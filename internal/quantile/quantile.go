// Package quantile is the one definition of a latency quantile for every
// benchmark (logstore/bench, logplayer/bench, the target and shard
// benchmarks) and the demo, so that a p99 in one table means what it means
// in another.
//
// Definition: exact quantiles over every recorded sample, by nearest rank.
// The q-quantile of n samples sorted ascending is the sample at 1-based
// rank ⌈q·n⌉ (clamped to 1..n): the smallest recorded value that at least
// a fraction q of the samples do not exceed. It is always a value that was
// measured (no interpolation between two samples), p100 is the maximum,
// and for 100 samples p99 is the 99th smallest. With fewer than 1/(1-q)
// samples the q-quantile is the maximum: a p99.9 over 500 samples says
// "the worst one".
//
// Why exact and not a histogram (HdrHistogram and the like): every caller
// keeps its samples anyway (at most a few hundred thousand durations per
// run), and exact values let a test pin the figures.
package quantile

import (
	"math"
	"slices"
	"time"
)

// Of returns the q-quantile (0 <= q <= 1) of ds by nearest rank, or 0 for
// no samples. It sorts ds in place (unless already sorted).
func Of(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	if !slices.IsSorted(ds) {
		slices.Sort(ds)
	}
	// The epsilon keeps q·n from rounding up past an exact rank
	// (0.29·100 is 28.999…, 0.57·100 is 57.000…1).
	rank := int(math.Ceil(q*float64(len(ds)) - 1e-9))
	return ds[min(max(rank, 1), len(ds))-1]
}

// Summary is what the benchmarks print of one latency distribution.
type Summary struct {
	N                   int
	Avg                 time.Duration // arithmetic mean
	P50, P99, P999, Max time.Duration // by Of
}

// Summarize returns ds's summary (zero for no samples). It sorts ds in
// place.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Summary{N: len(ds), Avg: sum / time.Duration(len(ds)),
		P50: Of(ds, 0.50), P99: Of(ds, 0.99), P999: Of(ds, 0.999), Max: ds[len(ds)-1]}
}
