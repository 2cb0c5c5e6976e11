package logstore

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/logstore/api"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// raftFSM is the raft.FSM of a node: the deterministic fsm.Machine plus the
// visible head that readers wait on.
//
// Apply runs on Raft's FSM goroutine only. It takes mu for the whole entry
// (state changes and segment appends), releases it, then advances the head:
// readers of the segment log never take mu (they read up to head, which only
// moves after a whole entry is applied), and readers of the state (Status,
// FetchOffsets, leader lookup) hold mu only to copy a few values, never
// across I/O.
type raftFSM struct {
	log     *segment.Log
	metrics *metrics
	dir     string     // node dir, for snapshot staging
	durable *atomicLSN // LSN of the newest durable snapshot (Node.durableLSN)
	// sent are the entries this node's aggregator has in flight: on the
	// leader Apply takes the one it built instead of decoding its bytes.
	sent *api.Sent

	mu struct {
		sync.Mutex
		sm *fsm.Machine
	}

	head   atomicLSN // highest visible LSN
	wakeMu sync.Mutex
	wake   chan struct{} // closed and replaced at every head advance
}

var _ raft.FSM = (*raftFSM)(nil)

func newFSM(log *segment.Log, st *fsm.State, cfg *Config, m *metrics) *raftFSM {
	f := &raftFSM{log: log, metrics: m, dir: cfg.Dir, sent: api.NewSent(), wake: make(chan struct{})}
	f.mu.sm = fsm.NewMachine(st, log) // limits come with each entry
	f.head.Store(st.LastLSN())
	m.headLSN.Set(float64(st.LastLSN()))
	m.registeredProducers.Set(float64(st.RegisteredProducers()))
	return f
}

// Apply implements raft.FSM. It returns []fsm.Result for command entries.
func (f *raftFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	start := time.Now()
	e := f.sent.Take(l.Data)
	if e == nil {
		e = new(logstorepb.Entry)
		if err := proto.Unmarshal(l.Data, e); err != nil {
			// Only our aggregator writes entries; garbage is a bug.
			panic(fmt.Sprintf("logstore: raft index %d: undecodable entry: %v", l.Index, err))
		}
	}
	f.mu.Lock()
	res := f.mu.sm.Apply(l.Index, e)
	last := f.mu.sm.State().LastLSN()
	producers := f.mu.sm.State().RegisteredProducers()
	f.mu.Unlock()
	f.metrics.registeredProducers.Set(float64(producers))
	f.advance(last)
	f.metrics.applyDuration.Observe(time.Since(start).Seconds())
	return res
}

// advance makes every LSN up to lsn visible and wakes waiting readers.
func (f *raftFSM) advance(lsn types.LSN) {
	if lsn != f.head.Load() {
		f.forceHead(lsn)
	}
}

// waitChan returns a channel closed at the next head advance. Load it
// before reading head, then wait on it if head is not far enough.
func (f *raftFSM) waitChan() <-chan struct{} {
	f.wakeMu.Lock()
	defer f.wakeMu.Unlock()
	return f.wake
}

// withState runs fn with the state locked; fn must not block.
func (f *raftFSM) withState(fn func(st *fsm.State)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.mu.sm.State())
}

// Snapshot implements raft.FSM: it captures the state now (on the FSM
// goroutine); Persist later checkpoints the segment log up to the captured
// LSN while applies go on.
func (f *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	st := f.mu.sm.State().ToProto()
	f.mu.Unlock()
	return &fsmSnapshot{f: f, state: st}, nil
}

// Restore implements raft.FSM: rc is a snapshot archive (see snapshot.go)
// sent by the leader; its segments replace the local log.
func (f *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := restoreArchive(rc, f.log, f.dir)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.mu.sm.SetState(st)
	producers := st.RegisteredProducers()
	f.mu.Unlock()
	f.metrics.registeredProducers.Set(float64(producers))
	f.durable.Store(st.LastLSN())
	f.forceHead(st.LastLSN())
	return nil
}

// forceHead sets head (which may go down on restore) and wakes readers.
func (f *raftFSM) forceHead(lsn types.LSN) {
	f.head.Store(lsn)
	f.metrics.headLSN.Set(float64(lsn))
	f.wakeMu.Lock()
	close(f.wake)
	f.wake = make(chan struct{})
	f.wakeMu.Unlock()
}

// atomicLSN is an LSN read and written atomically.
type atomicLSN struct{ v atomic.Uint64 }

func (a *atomicLSN) Load() types.LSN     { return types.LSN(a.v.Load()) }
func (a *atomicLSN) Store(lsn types.LSN) { a.v.Store(uint64(lsn)) }
