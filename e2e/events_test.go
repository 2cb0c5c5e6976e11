package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// eventsTarget is the events target's id (the dev cluster's name for it).
const eventsTarget = "events"

// eventsTopics are the events target's topics (`logplayer events`'
// default).
var eventsTopics = []string{demo.OrdersTopic, demo.InventoryTopic}

// eventsNode is the events target process (`logplayer events`): it keeps
// every message of eventsTopics it applies in its bbolt file in dir.
type eventsNode struct {
	id, addr, metrics, dir string
	proc                   *proc
}

func (e *eventsNode) targetID() string    { return e.id }
func (e *eventsNode) metricsAddr() string { return e.metrics }

// spec is its --target flag value for a LogPlayer.
func (e *eventsNode) spec() string {
	return fmt.Sprintf("%s=%s/%s", e.id, e.addr, strings.Join(eventsTopics, ","))
}

// applied returns the target's applied LSN (its target_applied_lsn gauge,
// set once an Apply is durable) once it is at least lsn, or an error
// (down, or still below).
func (e *eventsNode) applied(lsn uint64) (uint64, error) {
	v, err := metricValue(e.metrics, appliedLSNMetric, fmt.Sprintf("target=%q", e.id))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", e.id, err)
	}
	if uint64(v) < lsn {
		return uint64(v), fmt.Errorf("%s applied lsn %d, want %d", e.id, uint64(v), lsn)
	}
	return uint64(v), nil
}

// addEvents starts the events target process and makes it c's.
func (c *cluster) addEvents() *eventsNode {
	c.t.Helper()
	e := &eventsNode{id: eventsTarget, addr: freeAddr(c.t), metrics: freeAddr(c.t), dir: filepath.Join(c.dir, eventsTarget)}
	args := []string{"events", "--id", e.id, "--addr", e.addr, "--data-dir", e.dir, "--metrics-addr", e.metrics}
	if c.tls != nil {
		args = append(args, c.tls.args(e.id)...)
	}
	e.proc = newProc(c.t, c.dir, e.id, args...)
	e.proc.start()
	c.events = e
	return e
}

// checkEvents reads the stopped events target's file (demo.ReadEventLog)
// and checks it holds exactly the log's messages of eventsTopics (f.events:
// every one once, in LSN order, at its offset, as written, nothing else),
// that its durable State reached the head with each topic's next offset
// the log's message count, and that its epoch is what epochOf says.
func checkEvents(t testing.TB, e *eventsNode, f *logFacts, head uint64, epochOf func(id string) (uint64, string)) {
	t.Helper()
	got, st, err := demo.ReadEventLog(filepath.Join(e.dir, demo.EventLogFileName))
	if err != nil {
		t.Errorf("%s: %v", e.id, err)
		return
	}
	want := f.events
	bad := 0
	for i := range max(len(got), len(want)) {
		var g, w *demo.Event
		if i < len(got) {
			g = &got[i]
		}
		if i < len(want) {
			w = &want[i]
		}
		if g != nil && w != nil && g.LSN == w.LSN && g.Topic == w.Topic && g.Offset == w.Offset && proto.Equal(g.Message, w.Message) {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s: event %d is %s, the log's is %s", e.id, i, eventString(g), eventString(w))
		}
	}
	if bad > 0 || len(want) == 0 {
		t.Errorf("%s: %d of %d events differ from the log's %d", e.id, bad, len(got), len(want))
	}
	if uint64(st.AppliedLSN) != head {
		t.Errorf("%s: durable applied lsn %d, want the head %d", e.id, st.AppliedLSN, head)
	}
	for _, topic := range eventsTopics {
		if n := uint64(f.model.Messages(topic, 0, head)); uint64(st.Topics[topic]) != n {
			t.Errorf("%s: durable next offset of %s %d, the log has %d messages for it", e.id, topic, st.Topics[topic], n)
		}
	}
	if epoch, whose := epochOf(e.id); uint64(st.Epoch) != epoch {
		t.Errorf("%s: durable epoch %d, want %s %d", e.id, st.Epoch, whose, epoch)
	}
	t.Logf("%s: %d events equal to the log's, durable applied lsn %d, epoch %d, next offsets %v", e.id, len(got)-bad, st.AppliedLSN, st.Epoch, st.Topics)
}

// appendEvents appends to out the messages of eventsTopics in t, as the
// events target must store them.
func appendEvents(out []demo.Event, t *logstorepb.Transaction) []demo.Event {
	for _, s := range t.Slices {
		if !slices.Contains(eventsTopics, s.Topic) {
			continue
		}
		for i, m := range s.Messages {
			out = append(out, demo.Event{LSN: types.LSN(t.Lsn), Topic: s.Topic, Offset: types.Offset(s.FirstOffset + uint64(i)), Message: m})
		}
	}
	return out
}

func eventString(e *demo.Event) string {
	if e == nil {
		return "none"
	}
	return fmt.Sprintf("lsn %d %s@%d key %q", e.LSN, e.Topic, e.Offset, e.Message.GetKey())
}
