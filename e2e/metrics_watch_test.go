package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeTarget serves a target's /metrics with counters the test sets.
type fakeTarget struct {
	mu       sync.Mutex
	refusals map[string]int // reason -> count
	applied  int
}

func (f *fakeTarget) set(reason string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusals[reason] = n
}

// restart is a new process: every counter starts from zero.
func (f *fakeTarget) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for r := range f.refusals {
		f.refusals[r] = 0
	}
}

func (f *fakeTarget) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintln(w, "# HELP target_applied_lsn Durable applied LSN.")
	fmt.Fprintln(w, "# TYPE target_applied_lsn gauge")
	fmt.Fprintf(w, "target_applied_lsn{target=\"shard-0\"} %d\n", f.applied)
	fmt.Fprintln(w, "# TYPE target_refusals_total counter")
	for r, n := range f.refusals {
		fmt.Fprintf(w, "target_refusals_total{reason=%q,target=\"shard-0\"} %d\n", r, n)
	}
	fmt.Fprintln(w, "target_apply_duration_seconds_bucket{target=\"shard-0\",le=\"+Inf\"} 12")
}

// TestRefusalWatch checks the refusal bookkeeping the end-to-end tests rely
// on: an increase is bad unless its reason is allowed at the time it is
// seen, a restarted process's counters count again from zero, and a target
// whose metrics lack the applied-LSN gauge is reported.
func TestRefusalWatch(t *testing.T) {
	f := &fakeTarget{refusals: map[string]int{}, applied: 7}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := &shardNode{id: "shard-0", metrics: strings.TrimPrefix(srv.URL, "http://")}
	w := watchRefusals(t, []*shardNode{s}, "superseded")

	f.set("superseded", 2) // allowed all along
	fenced := w.allowDuring("stale_epoch", func() { f.set("stale_epoch", 1) })
	if fenced["shard-0"] != 1 {
		t.Fatalf("stale_epoch refusals during the window: %v, want 1", fenced)
	}
	f.set("stale_epoch", 3) // after the window: bad
	w.kill(s, f.restart)
	f.set("continuity", 1) // the new process: counts from zero
	w.sampleAll()

	bad, allowed, scrapes, err := w.close()
	if err != nil {
		t.Fatal(err)
	}
	wantBad := []string{
		`shard-0: target_refusals_total{reason="continuity",target="shard-0"} +1`,
		`shard-0: target_refusals_total{reason="stale_epoch",target="shard-0"} +2`,
	}
	wantAllowed := []string{
		`shard-0: target_refusals_total{reason="stale_epoch",target="shard-0"} +1`,
		`shard-0: target_refusals_total{reason="superseded",target="shard-0"} +2`,
	}
	if fmt.Sprint(bad) != fmt.Sprint(wantBad) || fmt.Sprint(allowed) != fmt.Sprint(wantAllowed) || scrapes < 4 {
		t.Fatalf("bad %q\nallowed %q\nscrapes %d\nwant bad %q\nallowed %q", bad, allowed, scrapes, wantBad, wantAllowed)
	}

	f.mu.Lock()
	f.applied = 0
	f.mu.Unlock()
	if _, _, _, err := w.close(); err == nil || !strings.Contains(err.Error(), "no positive target_applied_lsn") {
		t.Fatalf("a target without its applied LSN gauge: %v", err)
	}
}
