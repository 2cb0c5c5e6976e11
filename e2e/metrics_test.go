package e2e

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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

// refusalWatch samples the shards' target_refusals_total while the test
// runs: a counter lives as long as its process, so it is read regularly and
// right before each kill, and every non-zero sample is kept.
type refusalWatch struct {
	shards []*shardNode
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	mu     struct {
		sync.Mutex
		nonZero []string // "shard-1: reason=\"continuity\" 3"
		scrapes int      // successful scrapes
	}
}

// refusalScrapeEvery is the sampling interval of refusalWatch.
const refusalScrapeEvery = 250 * time.Millisecond

// watchRefusals samples the shards until close or the end of the test.
func watchRefusals(t testing.TB, shards []*shardNode) *refusalWatch {
	w := &refusalWatch{shards: shards, stop: make(chan struct{}), done: make(chan struct{})}
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
			for _, s := range w.shards {
				w.sample(s)
			}
		}
	}()
	return w
}

// sample reads s's refusal counters once; a shard that is down is skipped.
func (w *refusalWatch) sample(s *shardNode) {
	ss, err := scrape(s.metrics, refusalsMetric)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.scrapes++
	for _, x := range ss {
		if x.value != 0 {
			w.mu.nonZero = append(w.mu.nonZero, fmt.Sprintf("%s: %s{%s} %v", s.id, x.name, x.labels, x.value))
		}
	}
}

// close stops the sampling and returns every non-zero sample seen and how
// many scrapes succeeded. Idempotent.
func (w *refusalWatch) close() ([]string, int) {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.nonZero, w.mu.scrapes
}

// finalRefusals scrapes s once more: its refusal counters must be zero, and
// its applied-LSN gauge must be there (proof that the scrape reads the
// target's metrics at all).
func finalRefusals(s *shardNode) ([]string, error) {
	ss, err := scrape(s.metrics, refusalsMetric, appliedLSNMetric)
	if err != nil {
		return nil, fmt.Errorf("%s: scrape: %w", s.id, err)
	}
	var nonZero []string
	gauge := false
	for _, x := range ss {
		switch {
		case x.name == appliedLSNMetric:
			gauge = x.value > 0
		case x.value != 0:
			nonZero = append(nonZero, fmt.Sprintf("%s: %s{%s} %v", s.id, x.name, x.labels, x.value))
		}
	}
	if !gauge {
		return nonZero, fmt.Errorf("%s: no positive %s in its metrics", s.id, appliedLSNMetric)
	}
	return nonZero, nil
}
