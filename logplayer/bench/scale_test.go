package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A group of 2 shares 6 in-memory targets; the row reports per-target
// heap and RSS (CPU per transaction: too few samples in so short a row to
// assert) and a failover in which the survivor took over and delivered
// every target the killed member owned. A second row's group gets only its
// own targets (the first row's were unregistered).
func TestRunGroupSmall(t *testing.T) {
	cfg := Config{Targets: []int{6, 4}, TxnKB: []int{1}, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond,
		MemoryTargets: true, Group: 2}
	table, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 2 {
		t.Fatalf("rows: %+v", table.Rows)
	}
	if f := table.Rows[1].Failover; f == nil || f.Targets != 2 {
		t.Errorf("second row (the first row's targets unregistered): failover %+v", f)
	}
	r := table.Rows[0]
	if r.Members != 2 || r.Txns == 0 || r.Player.N == 0 || r.Bare.N == 0 || r.HeapIdle <= 0 || r.HeapLoad <= 0 {
		t.Errorf("row %+v", r)
	}
	f := r.Failover
	if f == nil || f.Targets != 3 || f.Lease <= 0 || f.Owned <= 0 || f.Delivered <= 0 {
		t.Fatalf("failover %+v", f)
	}
	s := table.String()
	if !strings.Contains(s, "| 6 | 2 | 1 KB | 3 | ") || !strings.Contains(s, "heap/target idle") {
		t.Errorf("table:\n%s", s)
	}
	t.Logf("\n%s", s)
}

func TestGroupRejectsProcesses(t *testing.T) {
	for _, c := range []Config{{Group: -1}, {Group: 2, Spawn: spawnSelf}} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// labelledCPU counts the CPU of goroutines started under asPlayer (and
// their children), not of others.
func TestLabelledCPU(t *testing.T) {
	prof := startCPU()
	if prof == nil {
		t.Fatal("a CPU profile is already running")
	}
	var stop atomic.Bool
	spin := func() {
		x := 0
		for !stop.Load() {
			x++
		}
		_ = x
	}
	done := make(chan struct{}, 2)
	asPlayer(context.Background(), func(context.Context) {
		go func() { // a child of a labelled goroutine inherits the label
			spin()
			done <- struct{}{}
		}()
	})
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	<-done
	labelled, err := prof.stop()
	if err != nil {
		t.Fatal(err)
	}
	if labelled < int64(50*time.Millisecond) {
		t.Errorf("labelled CPU %v, want most of 300ms", time.Duration(labelled))
	}
	// And nothing when no goroutine carries the label.
	prof = startCPU()
	stop.Store(false)
	go func() { spin(); done <- struct{}{} }()
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	<-done
	if labelled, err = prof.stop(); err != nil || labelled != 0 {
		t.Errorf("unlabelled run: %v %v", time.Duration(labelled), err)
	}
}
