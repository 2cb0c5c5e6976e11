package demo

import (
	"sort"
	"sync"
	"time"

	"github.com/logplayer/logplayer/proto/targetpb"
)

// Recorder counts, per target, how many times each (topic, offset) was
// durably applied and when each LSN was first applied. Feed it from the
// target side, after the store's local transaction committed (see
// RecordingStore). Safe for concurrent use.
type Recorder struct {
	now func() time.Time
	mu  struct {
		sync.Mutex
		targets map[string]*tally
	}
}

// tally is one target's record. Guarded by Recorder.mu.
type tally struct {
	// counts[topic][offset] is how many times that message was applied
	// (saturating at 255).
	counts   map[string][]uint8
	applied  map[uint64]time.Time // LSN with data -> first apply time
	messages int                  // every applied message, repeats included
	lastLSN  uint64               // highest LSN applied, progress markers included
}

// NewRecorder returns an empty recorder using now (time.Now when nil).
func NewRecorder(now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	r := &Recorder{now: now}
	r.mu.targets = map[string]*tally{}
	return r
}

// Applied records that target durably applied ds.
func (r *Recorder) Applied(target string, ds []*targetpb.Delivery) {
	at := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tallyLocked(target)
	for _, d := range ds {
		t.lastLSN = max(t.lastLSN, d.Lsn)
		if len(d.Slices) == 0 {
			continue
		}
		if _, ok := t.applied[d.Lsn]; !ok {
			t.applied[d.Lsn] = at
		}
		for _, s := range d.Slices {
			c := t.counts[s.Topic]
			for i := range s.Messages {
				off := int(s.FirstOffset) + i
				for len(c) <= off {
					c = append(c, 0)
				}
				if c[off] < 255 {
					c[off]++
				}
				t.messages++
			}
			t.counts[s.Topic] = c
		}
	}
}

func (r *Recorder) tallyLocked(target string) *tally {
	t := r.mu.targets[target]
	if t == nil {
		t = &tally{counts: map[string][]uint8{}, applied: map[uint64]time.Time{}}
		r.mu.targets[target] = t
	}
	return t
}

// TargetProgress is one target's applied position so far.
type TargetProgress struct {
	Messages int    // messages applied, repeats included
	LastLSN  uint64 // highest LSN applied, progress markers included
}

// Progress returns every recorded target's position.
func (r *Recorder) Progress() map[string]TargetProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]TargetProgress, len(r.mu.targets))
	for id, t := range r.mu.targets {
		out[id] = TargetProgress{Messages: t.messages, LastLSN: t.lastLSN}
	}
	return out
}

// TargetAudit is the delivery audit of one target over an LSN range.
type TargetAudit struct {
	Target     string `json:"target"`
	Expected   int    `json:"expected"`   // messages of its topics in the range, per the log
	Delivered  int    `json:"delivered"`  // of those, applied at least once
	Duplicates int    `json:"duplicates"` // extra applications of those
	Missing    int    `json:"missing"`    // of those, never applied
}

// Audit compares what each target applied with what the log holds for its
// topics in LSNs (afterLSN, throughLSN]. subs maps target id to topics.
func (r *Recorder) Audit(m *Model, subs map[string][]string, afterLSN, throughLSN uint64) []TargetAudit {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(subs))
	for id := range subs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]TargetAudit, 0, len(ids))
	for _, id := range ids {
		a := TargetAudit{Target: id}
		t := r.tallyLocked(id)
		for _, topic := range subs[id] {
			counts := t.counts[topic]
			for off, lsn := range m.messages[topic] {
				if lsn <= afterLSN || lsn > throughLSN {
					continue
				}
				a.Expected++
				c := 0
				if off < len(counts) {
					c = int(counts[off])
				}
				if c == 0 {
					a.Missing++
					continue
				}
				a.Delivered++
				a.Duplicates += c - 1
			}
		}
		out = append(out, a)
	}
	return out
}

// ApplyLatencies returns, for every (target, LSN) applied whose Append
// started at starts[LSN], the time from that start to the durable apply.
func (r *Recorder) ApplyLatencies(starts map[uint64]time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, t := range r.mu.targets {
		for lsn, at := range t.applied {
			if s, ok := starts[lsn]; ok {
				out = append(out, at.Sub(s))
			}
		}
	}
	return out
}
