package demo

import (
	"sort"
	"sync"
	"time"

	"github.com/logplayer/logplayer/proto/targetpb"
)

// Recorder learns what targets applied, in two ways:
//   - Applied (from a RecordingStore wrapped around a target's store): every
//     message applied, so it counts, per target, how many times each
//     (topic, offset) was durably applied;
//   - Advanced (from WatchApplied, for targets that cannot be wrapped, such
//     as a shard in another process): when the target's applied LSN moved.
//
// Both record when each applied LSN was reached, for apply latencies. Safe
// for concurrent use.
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
	messages int       // every applied message, repeats included
	advances []advance // applied LSN over time, LSN increasing
}

// advance says the target's applied LSN reached lsn at time at.
type advance struct {
	lsn uint64
	at  time.Time
}

func (t *tally) lastLSN() uint64 {
	if len(t.advances) == 0 {
		return 0
	}
	return t.advances[len(t.advances)-1].lsn
}

// advanceTo records that the applied LSN reached lsn at at.
func (t *tally) advanceTo(lsn uint64, at time.Time) {
	if lsn > t.lastLSN() {
		t.advances = append(t.advances, advance{lsn: lsn, at: at})
	}
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
		t.advanceTo(d.Lsn, at)
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

// Advanced records that target's durable applied LSN is now lsn.
func (r *Recorder) Advanced(target string, lsn uint64) {
	at := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tallyLocked(target).advanceTo(lsn, at)
}

func (r *Recorder) tallyLocked(target string) *tally {
	t := r.mu.targets[target]
	if t == nil {
		t = &tally{counts: map[string][]uint8{}}
		r.mu.targets[target] = t
	}
	return t
}

// TargetProgress is one target's applied position so far.
type TargetProgress struct {
	Messages int    // messages applied, repeats included (Applied only)
	LastLSN  uint64 // highest LSN applied, progress markers included
}

// Progress returns every recorded target's position.
func (r *Recorder) Progress() map[string]TargetProgress {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]TargetProgress, len(r.mu.targets))
	for id, t := range r.mu.targets {
		out[id] = TargetProgress{Messages: t.messages, LastLSN: t.lastLSN()}
	}
	return out
}

// TargetAudit is the delivery audit of one target over an LSN range.
type TargetAudit struct {
	Target     string `json:"target"`
	Method     string `json:"method"`     // MethodPerApply or MethodPosition
	Expected   int    `json:"expected"`   // messages of its topics in the range, per the log
	Delivered  int    `json:"delivered"`  // of those, applied at least once
	Duplicates int    `json:"duplicates"` // extra applications of those
	Missing    int    `json:"missing"`    // of those, never applied
}

// How a TargetAudit was measured.
const (
	// MethodPerApply: every application of every message was counted.
	MethodPerApply = "per-apply"
	// MethodPosition: from the target's applied LSN (delivered or missing)
	// and its final state against the model (duplicates).
	MethodPosition = "position+state"
)

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
		a := TargetAudit{Target: id, Method: MethodPerApply}
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

// ApplyLatencies returns, for every target in subs and every LSN in
// (after, through] with data for its topics whose Append started at
// starts[LSN], the time from that start to when the target's applied LSN
// first covered it. LSNs the target never reached are left out.
func (r *Recorder) ApplyLatencies(m *Model, subs map[string][]string, after, through uint64, starts map[uint64]time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for id, topics := range subs {
		advs := r.tallyLocked(id).advances
		lsns := map[uint64]bool{}
		for _, topic := range topics {
			for _, lsn := range m.messages[topic] {
				if lsn > after && lsn <= through {
					lsns[lsn] = true
				}
			}
		}
		for lsn := range lsns {
			start, ok := starts[lsn]
			if !ok {
				continue
			}
			i := sort.Search(len(advs), func(i int) bool { return advs[i].lsn >= lsn })
			if i < len(advs) {
				out = append(out, advs[i].at.Sub(start))
			}
		}
	}
	return out
}
