package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// scrapeTimeout bounds one /metrics request.
const scrapeTimeout = 2 * time.Second

var scrapeClient = &http.Client{Timeout: scrapeTimeout}

// sample is one line of the Prometheus text format: name{labels} value.
type sample struct {
	name, labels string
	value        float64
}

// scrape reads every sample of the families named in names from the
// Prometheus endpoint at addr (host:port).
func scrape(addr string, names ...string) ([]sample, error) {
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		head, val, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("metrics line %q", line)
		}
		name, labels, _ := strings.Cut(head, "{")
		want := false
		for _, n := range names {
			want = want || n == name
		}
		if !want {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %v", line, err)
		}
		out = append(out, sample{name: name, labels: strings.TrimSuffix(labels, "}"), value: v})
	}
	return out, sc.Err()
}

// Metric names the tests read (package target).
const (
	refusalsMetric   = "target_refusals_total"
	appliedLSNMetric = "target_applied_lsn"
)

// watchedTarget is a target process whose metrics refusalWatch samples:
// a shard or the events target.
type watchedTarget interface {
	targetID() string
	metricsAddr() string
}

// refusalWatch samples the targets' target_refusals_total while the test
// runs. A counter lives as long as its process, so it is read regularly and
// right before each kill, and every increase is attributed, when it is
// seen, to a reason the faults of that moment allow, or to a fault of the
// system.
type refusalWatch struct {
	targets []watchedTarget
	// always are the reasons the test's faults make legitimate all along
	// (a partition leaves a stream the LogPlayer gave up on open at the
	// target until a newer one supersedes it).
	always []string
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	mu     struct {
		sync.Mutex
		last    map[string]float64 // series -> value at the last scrape of its process
		gen     map[string]int     // target id -> processes killed (a scrape across a kill is dropped)
		allow   map[string]bool    // reasons allowed for now (allowDuring)
		bad     map[string]float64 // series -> increases not allowed
		allowed map[string]float64 // series -> increases allowed
		scrapes int                // successful scrapes
	}
}

// refusalScrapeEvery is the sampling interval of refusalWatch.
const refusalScrapeEvery = 250 * time.Millisecond

// watchRefusals samples the shards until close or the end of the test;
// always lists reasons allowed all along.
func watchRefusals(t testing.TB, shards []*shardNode, always ...string) *refusalWatch {
	var targets []watchedTarget
	for _, s := range shards {
		targets = append(targets, s)
	}
	return watchTargets(t, targets, always...)
}

// watchTargets is watchRefusals of any targets.
func watchTargets(t testing.TB, targets []watchedTarget, always ...string) *refusalWatch {
	w := &refusalWatch{targets: targets, always: always, stop: make(chan struct{}), done: make(chan struct{})}
	w.mu.last, w.mu.allow, w.mu.gen = map[string]float64{}, map[string]bool{}, map[string]int{}
	w.mu.bad, w.mu.allowed = map[string]float64{}, map[string]float64{}
	for _, r := range always {
		w.mu.allow[r] = true
	}
	t.Cleanup(func() { w.close() })
	go func() {
		defer close(w.done)
		tick := time.NewTicker(refusalScrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			for _, s := range w.targets {
				_ = w.sample(s)
			}
		}
	}()
	return w
}

// seriesKey names a sample of target s.
func seriesKey(s watchedTarget, x sample) string {
	return fmt.Sprintf("%s: %s{%s}", s.targetID(), x.name, x.labels)
}

// sample reads s's refusal counters once (an error when s is down), and
// checks that its applied-LSN gauge is there and positive: proof that the
// scrape reads the target's metrics at all.
func (w *refusalWatch) sample(s watchedTarget) error {
	w.mu.Lock()
	gen := w.mu.gen[s.targetID()]
	w.mu.Unlock()
	ss, err := scrape(s.metricsAddr(), refusalsMetric, appliedLSNMetric)
	if err != nil {
		return fmt.Errorf("%s: scrape: %w", s.targetID(), err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.gen[s.targetID()] != gen {
		return nil // read from the process killed meanwhile (sampled before the kill)
	}
	w.mu.scrapes++
	gauge := false
	for _, x := range ss {
		if x.name == appliedLSNMetric {
			gauge = x.value > 0
			continue
		}
		k := seriesKey(s, x)
		delta := x.value - w.mu.last[k]
		w.mu.last[k] = x.value
		if delta <= 0 {
			continue
		}
		reasonAllowed := false
		for r, ok := range w.mu.allow {
			reasonAllowed = reasonAllowed || ok && strings.Contains(x.labels, fmt.Sprintf("reason=%q", r))
		}
		if reasonAllowed {
			w.mu.allowed[k] += delta
		} else {
			w.mu.bad[k] += delta
		}
	}
	if !gauge {
		return fmt.Errorf("%s: no positive %s in its metrics", s.targetID(), appliedLSNMetric)
	}
	return nil
}

// kill samples s, kills its process with kill, and forgets the counters
// that died with it (the next process starts from zero).
func (w *refusalWatch) kill(s watchedTarget, kill func()) {
	_ = w.sample(s)
	kill()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.gen[s.targetID()]++
	for k := range w.mu.last {
		if strings.HasPrefix(k, s.targetID()+": ") {
			delete(w.mu.last, k)
		}
	}
}

// allowDuring allows reason while fn runs: every target is sampled before
// and after, so what changed in between is attributed to fn's fault. It
// returns how many refusals with that reason each target counted
// meanwhile.
func (w *refusalWatch) allowDuring(reason string, fn func()) map[string]float64 {
	w.sampleAll()
	before := w.count(reason)
	w.mu.Lock()
	w.mu.allow[reason] = true
	w.mu.Unlock()
	fn()
	w.sampleAll()
	w.mu.Lock()
	w.mu.allow[reason] = slices.Contains(w.always, reason)
	w.mu.Unlock()
	out := w.count(reason)
	for k, v := range before {
		out[k] -= v
	}
	return out
}

func (w *refusalWatch) sampleAll() {
	for _, s := range w.targets {
		_ = w.sample(s)
	}
}

// count returns the allowed refusals with reason so far, per target id.
func (w *refusalWatch) count(reason string) map[string]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]float64{}
	for k, v := range w.mu.allowed {
		if strings.Contains(k, fmt.Sprintf("reason=%q", reason)) {
			id, _, _ := strings.Cut(k, ": ")
			out[id] += v
		}
	}
	return out
}

// close stops the sampling (idempotent), samples every target once more
// (they must all answer) and returns the refusals counted: those no fault
// allowed, those allowed, and how many scrapes succeeded.
func (w *refusalWatch) close() (bad, allowed []string, scrapes int, err error) {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	var errs []error
	for _, s := range w.targets {
		errs = append(errs, w.sample(s))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.mu.bad {
		bad = append(bad, fmt.Sprintf("%s +%v", k, v))
	}
	for k, v := range w.mu.allowed {
		allowed = append(allowed, fmt.Sprintf("%s +%v", k, v))
	}
	slices.Sort(bad)
	slices.Sort(allowed)
	return bad, allowed, w.mu.scrapes, errors.Join(errs...)
}

// LogPlayer metrics (package logplayer) the tests read.
var (
	// playerMustBeZero are series that show a delivery fault: a target
	// refused a stream, acked what was never sent, needed data below
	// retention, or is blocked waiting for an operator.
	playerMustBeZero = []string{"logplayer_target_refusals_total", "logplayer_target_bogus_acks_total", "logplayer_target_blocked"}
	// playerInformative are counted and logged: how much recovery the
	// faults caused.
	playerInformative = []string{"logplayer_target_suspends_total", "logplayer_target_returns_total",
		"logplayer_target_recoveries_total", "logplayer_target_stale_term_drops_total", "logplayer_target_recovery_errors_total"}
)

// checkPlayerMetrics scrapes the LogPlayer at addr (its counters cover the
// current instance only): every series of playerMustBeZero, and the
// below_retention recovery errors, must be zero. It returns the
// informative series, one line each, for the log.
//
// A refusal series whose labels contain one of allowed (a group member
// fenced by a newer token: `code="STALE_EPOCH"`) counts as informative.
func checkPlayerMetrics(addr string, allowed ...string) ([]string, error) {
	ss, err := scrape(addr, append(slices.Clone(playerMustBeZero), playerInformative...)...)
	if err != nil {
		return nil, fmt.Errorf("player: scrape: %w", err)
	}
	var info, bad []string
	for _, x := range ss {
		line := fmt.Sprintf("%s{%s} %v", x.name, x.labels, x.value)
		switch {
		case x.name == "logplayer_target_refusals_total" && slices.ContainsFunc(allowed, func(a string) bool { return strings.Contains(x.labels, a) }):
			info = append(info, line)
		case slices.Contains(playerMustBeZero, x.name) || strings.Contains(x.labels, `reason="below_retention"`):
			if x.value != 0 {
				bad = append(bad, line)
			}
		default:
			info = append(info, line)
		}
	}
	if len(bad) > 0 {
		return info, fmt.Errorf("LogPlayer reports delivery faults:\n%s", strings.Join(bad, "\n"))
	}
	return info, nil
}

// metricValue returns the value of the series name{labels} at addr.
func metricValue(addr, name, labels string) (float64, error) {
	ss, err := scrape(addr, name)
	if err != nil {
		return 0, err
	}
	for _, x := range ss {
		if x.labels == labels {
			return x.value, nil
		}
	}
	return 0, fmt.Errorf("no %s{%s} at %s", name, labels, addr)
}
