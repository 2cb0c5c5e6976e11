package demo

import (
	"sync"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
)

// RecordingStore wraps a target.Store and reports every successful Apply to
// a Recorder, after the inner store's local transaction committed, so the
// Recorder sees exactly what became durable.
type RecordingStore struct {
	inner  target.Store
	target string
	rec    *Recorder
}

var _ target.Store = (*RecordingStore)(nil)

// Record returns s wrapped so that rec learns what target applies.
func (r *Recorder) Record(targetID string, s target.Store) *RecordingStore {
	return &RecordingStore{inner: s, target: targetID, rec: r}
}

// State implements target.Store.
func (s *RecordingStore) State() (target.State, error) { return s.inner.State() }

// Apply implements target.Store.
func (s *RecordingStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	if err := s.inner.Apply(ds, next); err != nil {
		return err
	}
	s.rec.Applied(s.target, ds)
	return nil
}

// EventStore is the demo's events target: an in-memory target.Store for
// the orders and inventory topics that counts the events it applies (any
// message: `logplayer append` may write events of its own shape). Its
// State lives as long as the value (enough for one dev process; EventLog
// is the durable one, which `logplayer events` serves).
type EventStore struct {
	mu     sync.Mutex
	st     target.State
	events int
}

var _ target.Store = (*EventStore)(nil)

// State implements target.Store.
func (e *EventStore) State() (target.State, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.Clone(), nil
}

// Apply implements target.Store.
func (e *EventStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	n := 0
	for _, d := range ds {
		for _, s := range d.Slices {
			n += len(s.Messages)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st = next.Clone()
	e.events += n
	return nil
}

// Events is the number of events applied.
func (e *EventStore) Events() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.events
}
