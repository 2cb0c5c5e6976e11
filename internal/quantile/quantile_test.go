package quantile

import (
	"testing"
	"time"
)

// 1..100 ms in reverse: p50 is the 50th smallest, p99 the 99th, p99.9 and
// p100 the largest, p0 and p0.5 the smallest.
func TestOfNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(101-i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0, 1}, {0.005, 1}, {0.01, 1}, {0.011, 2}, {0.29, 29}, {0.5, 50}, {0.57, 57},
		{0.501, 51}, {0.99, 99}, {0.999, 100}, {1, 100},
	} {
		if got := Of(ds, c.q); got != c.want*time.Millisecond {
			t.Errorf("q%v = %v, want %vms", c.q, got, int(c.want))
		}
	}
	if q := Of(nil, 0.5); q != 0 {
		t.Fatalf("empty p50 = %v", q)
	}
	// Small samples: nearest rank never invents a value.
	if q := Of([]time.Duration{3, 1, 2}, 0.5); q != 2 {
		t.Fatalf("p50 of 1,2,3 = %v", q)
	}
	if q := Of([]time.Duration{1, 2}, 0.5); q != 1 {
		t.Fatalf("p50 of 1,2 = %v, want 1 (rank ⌈1⌉)", q)
	}
}

func TestSummarize(t *testing.T) {
	ds := make([]time.Duration, 0, 1000)
	for i := 1000; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	got := Summarize(ds)
	us := time.Microsecond
	want := Summary{N: 1000, Avg: 500500 * time.Nanosecond, P50: 500 * us, P99: 990 * us, P999: 999 * us, Max: 1000 * us}
	if got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("Summarize(nil) not zero")
	}
}
