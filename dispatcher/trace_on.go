//go:build tlatrace

package dispatcher

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// Trace validation (tla/Trace.tla): built with -tags tlatrace, every
// Dispatcher action is written, under the dispatcher's mutex (so in the
// order the actions took effect), as one JSON line to the writer set by
// SetTraceWriter. Without the tag trace_off.go makes every hook a no-op
// that the compiler removes.

const traceOn = true

var tracer struct {
	mu sync.Mutex
	w  io.Writer
}

// SetTraceWriter sets where the actions go (nil: nowhere).
func SetTraceWriter(w io.Writer) {
	tracer.mu.Lock()
	tracer.w = w
	tracer.mu.Unlock()
}

// traceEvent is one line: the spec's action name, its arguments, its
// outcome and the target's state after it (checked by tla/Trace.tla).
type traceEvent struct {
	Act     string              `json:"act"`
	Target  string              `json:"t"`
	Term    types.Term          `json:"term"`
	LSN     types.LSN           `json:"lsn"`
	Topics  []string            `json:"topics"`
	Max     int                 `json:"max"`
	LSNs    []types.LSN         `json:"lsns"`
	Data    []bool              `json:"data"`
	Wake    []string            `json:"wake"`
	Slow    []string            `json:"slow"`
	Res     string              `json:"res"`
	From    types.LSN           `json:"from"`
	To      types.LSN           `json:"to"`
	QMax    int                 `json:"qmax"`
	Targets map[string][]string `json:"targets"`
	// The target's state after the action.
	St      string     `json:"st"`
	QTerm   types.Term `json:"qterm"`
	LastAck types.LSN  `json:"lastAck"`
	Current types.LSN  `json:"current"`
}

func (d *Dispatcher) emit(e traceEvent, t *target) {
	tracer.mu.Lock()
	defer tracer.mu.Unlock()
	if tracer.w == nil {
		return
	}
	e.Current = d.mu.currentLSN
	for _, p := range []*[]string{&e.Topics, &e.Wake, &e.Slow} {
		if *p == nil {
			*p = []string{}
		}
	}
	if e.LSNs == nil {
		e.LSNs, e.Data = []types.LSN{}, []bool{}
	}
	if e.Targets == nil {
		e.Targets = map[string][]string{}
	}
	if t != nil {
		e.Target = t.id
		e.St = t.q.State().String()
		e.QTerm = t.q.Term()
		e.LastAck = t.lastAck
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic("dispatcher: trace: " + err.Error())
	}
	_, _ = tracer.w.Write(append(b, '\n'))
}

// traceTargets (after AddTarget) records the dispatcher's start: its
// start LSN, queue bound and every target's topics so far.
func (d *Dispatcher) traceTargets() {
	ts := make(map[string][]string, len(d.mu.targets))
	for id, t := range d.mu.targets {
		for topic := range t.topics {
			ts[id] = append(ts[id], topic)
		}
		slices.Sort(ts[id])
	}
	d.emit(traceEvent{Act: "Targets", Targets: ts, QMax: d.cfg.Queue.MaxCount}, nil)
}

func (d *Dispatcher) traceDispatch(txn *logstorepb.Transaction, wake, slow []string) {
	topics := []string{}
	for _, s := range txn.Slices {
		if !slices.Contains(topics, s.Topic) {
			topics = append(topics, s.Topic)
		}
	}
	slices.Sort(topics)
	d.emit(traceEvent{Act: "Dispatch", LSN: types.LSN(txn.Lsn), Topics: topics, Wake: wake, Slow: slow}, nil)
}

func (d *Dispatcher) traceReturn(id string, r *Recovery) {
	t := d.mu.targets[id]
	if t == nil {
		return
	}
	res := "RF"
	if r.Empty {
		res = "Empty"
	}
	d.emit(traceEvent{Act: "Return", Term: r.Term, From: r.From, To: r.To, Res: res}, t)
}

func (d *Dispatcher) tracePushCatchup(id string, term types.Term, lsn types.LSN, res *targetqueue.PushResult) {
	t := d.mu.targets[id]
	if t == nil {
		return
	}
	d.emit(traceEvent{Act: "PushCatchup", Term: term, LSN: lsn, Res: res.String()}, t)
}

func (d *Dispatcher) traceFetchingCompleted(id string, term types.Term, ok *bool) {
	if t := d.mu.targets[id]; t != nil {
		d.emit(traceEvent{Act: "FetchingCompleted", Term: term, Res: boolRes(*ok)}, t)
	}
}

func (d *Dispatcher) traceSuspend(id string) {
	if t := d.mu.targets[id]; t != nil {
		d.emit(traceEvent{Act: "Suspend"}, t)
	}
}

func (d *Dispatcher) traceNextBatch(id string, term types.Term, max int, batch *[]targetqueue.Msg, ok *bool) {
	t := d.mu.targets[id]
	if t == nil {
		return
	}
	e := traceEvent{Act: "NextBatch", Term: term, Max: max, Res: boolRes(*ok)}
	e.LSNs, e.Data = []types.LSN{}, []bool{}
	for _, m := range *batch {
		e.LSNs = append(e.LSNs, m.LSN)
		e.Data = append(e.Data, !m.IsProgress())
	}
	d.emit(e, t)
}

func (d *Dispatcher) traceAck(id string, term types.Term, lsn types.LSN, err *error) {
	t := d.mu.targets[id]
	if t == nil {
		return
	}
	res := "ok"
	switch {
	case errors.Is(*err, ErrStaleTerm):
		res = "stale"
	case errors.Is(*err, ErrBogusAck):
		res = "bogus"
	}
	d.emit(traceEvent{Act: "Ack", Term: term, LSN: lsn, Res: res}, t)
}

func (d *Dispatcher) traceProgress(id string, pushed *bool) {
	if t := d.mu.targets[id]; t != nil {
		d.emit(traceEvent{Act: "Progress", Res: boolRes(*pushed)}, t)
	}
}

func boolRes(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
