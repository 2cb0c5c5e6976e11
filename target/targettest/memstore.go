package targettest

import (
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
)

// MemStore is an in-memory target.Store that records what it applied. Its
// State survives only as long as the value (a "restart" is a new Server on
// the same MemStore).
type MemStore struct {
	// BeforeApply, when set, runs at the start of every Apply (from the
	// applier goroutine); a non-nil error fails the Apply with nothing
	// applied. Tests use it to block the applier or inject failures. Set it
	// before the Server starts.
	BeforeApply func(ds []*targetpb.Delivery, next target.State) error
	// Forget, when set, keeps only the State, not the applied deliveries
	// (benchmarks).
	Forget bool

	mu struct {
		sync.Mutex
		st      target.State
		applied []*targetpb.Delivery
		calls   int
	}
}

var _ target.Store = (*MemStore)(nil)

// State implements target.Store.
func (m *MemStore) State() (target.State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.st.Clone(), nil
}

// Apply implements target.Store.
func (m *MemStore) Apply(ds []*targetpb.Delivery, next target.State) error {
	if m.BeforeApply != nil {
		if err := m.BeforeApply(ds, next); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range ds {
		if m.Forget {
			break
		}
		m.mu.applied = append(m.mu.applied, proto.Clone(d).(*targetpb.Delivery))
	}
	m.mu.st = next.Clone()
	m.mu.calls++
	return nil
}

// Applied returns the deliveries applied so far, in order.
func (m *MemStore) Applied() []*targetpb.Delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*targetpb.Delivery(nil), m.mu.applied...)
}

// Calls is the number of successful Apply calls (epoch-only ones included).
func (m *MemStore) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.calls
}
