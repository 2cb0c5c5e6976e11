// Package targetqueue is the per-target queue of the LogPlayer paper
// (Algorithms 1 and 2): a normal queue fed by the main stream, a catchup
// queue fed by a recovery stream, a state (N, RF, FC, S), a term, batching,
// and the list of messages in flight to the target.
//
// It is a plain, synchronous state machine: no goroutines, no locks, no
// clocks. The dispatcher package owns every Queue and serialises all calls
// under its one mutex; tests drive it directly.
//
// # Goroutines
//
// None. Every method runs on its caller's goroutine and never blocks.
//
// # Invariants (checked; a violation is a bug and panics with the numbers)
//
//   - term starts at 1 and only grows, by one at each Return.
//   - In S both inner queues and the in-flight list are empty.
//   - In N the catchup queue is empty.
//   - Within one term, the LSNs pushed into each inner queue strictly
//     increase, and the LSNs leaving NextBatch strictly increase (catchup
//     messages first, then normal ones: the dispatcher guarantees that every
//     catchup LSN is below every normal LSN of the same term).
//   - The in-flight list holds, in LSN order, the messages NextBatch handed
//     out in the current term and Ack has not released.
//   - Each inner queue holds at most MaxCount messages and at most MaxBytes
//     payload bytes, except that one message alone may exceed MaxBytes (so a
//     single huge transaction cannot wedge a target forever).
package targetqueue

import (
	"fmt"
	"strconv"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// State is a target queue's state (the paper's Figure 2).
type State uint8

const (
	// Normal (N): the target is up and not recovering; Front serves the
	// normal queue.
	Normal State = iota
	// RecoveryFetching (RF): the target returned and its recovery stream is
	// still fetching; Front serves only the catchup queue.
	RecoveryFetching
	// FetchingCompleted (FC): the recovery stream has pushed everything;
	// Front serves the catchup queue, and popping its last message moves
	// the queue to N.
	FetchingCompleted
	// Suspended (S): the target is down or disconnected; pushes are dropped
	// and Front serves nothing.
	Suspended
)

// String returns the paper's short name: "N", "RF", "FC" or "S".
func (s State) String() string {
	switch s {
	case Normal:
		return "N"
	case RecoveryFetching:
		return "RF"
	case FetchingCompleted:
		return "FC"
	case Suspended:
		return "S"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Msg is one transaction's slices for one target, or a progress marker.
type Msg struct {
	LSN types.LSN
	// Slices holds only the target's topics. Nil or empty: a progress
	// marker that only advances the target's applied LSN.
	Slices []*logstorepb.TxnSlice
	// TimestampUnixNano is the log time of the transaction.
	TimestampUnixNano int64
	// DispatchedUnixNano is when the dispatcher pushed it (metrics only).
	DispatchedUnixNano int64
	// Bytes is the payload size counted against the queue bounds.
	Bytes int64
}

// IsProgress reports whether m is a progress marker (no slices).
func (m Msg) IsProgress() bool { return len(m.Slices) == 0 }

// PushResult says what Push did.
type PushResult uint8

const (
	// Pushed: the message is queued.
	Pushed PushResult = iota
	// DroppedStale: the caller's term is not the current one (a stale
	// recovery fetcher, or a push racing a return); nothing changed.
	DroppedStale
	// DroppedSuspended: the queue is in S; nothing changed.
	DroppedSuspended
	// Overflow: the message would exceed a bound of its inner queue;
	// nothing changed.
	Overflow
)

func (r PushResult) String() string {
	switch r {
	case Pushed:
		return "Pushed"
	case DroppedStale:
		return "DroppedStale"
	case DroppedSuspended:
		return "DroppedSuspended"
	case Overflow:
		return "Overflow"
	}
	return fmt.Sprintf("PushResult(%d)", uint8(r))
}

// Queue is one target's queue. The zero value is not usable: call New.
// Not safe for concurrent use; the dispatcher's mutex guards it.
type Queue struct {
	cfg   Config
	term  types.Term
	state State

	normal   fifo
	catchup  fifo
	inFlight fifo

	// Highest LSN pushed into each inner queue, and highest LSN handed out
	// by NextBatch, in this term (0: none). They check the ordering
	// invariants, and lastSent tells a late ack from a bogus one.
	// Suspend keeps them: nothing is pushed or sent in S, and an ack of
	// what was sent before the suspension may still arrive.
	lastNormal  types.LSN
	lastCatchup types.LSN
	lastSent    types.LSN
}

// New returns a queue in term 1 and state S: a target starts disconnected
// until its handshake (Return). Zero fields of cfg take their defaults; a
// negative one panics (callers check configuration with Config.Validate).
func New(cfg Config) *Queue {
	if err := cfg.validate(); err != nil {
		panic("targetqueue: " + err.Error())
	}
	return &Queue{cfg: cfg, term: 1, state: Suspended}
}

// Term returns the current term.
func (q *Queue) Term() types.Term { return q.term }

// State returns the current state.
func (q *Queue) State() State { return q.state }

// Len returns the number of messages in the normal and catchup queues.
func (q *Queue) Len() (normal, catchup int) { return q.normal.len(), q.catchup.len() }

// Bytes returns the payload bytes held in the normal and catchup queues.
func (q *Queue) Bytes() (normal, catchup int64) { return q.normal.bytes, q.catchup.bytes }

// InFlight returns the number and payload bytes of the messages handed out by
// NextBatch and not yet released by Ack.
func (q *Queue) InFlight() (count int, bytes int64) { return q.inFlight.len(), q.inFlight.bytes }

// LastSent returns the highest LSN NextBatch handed out in this term (0 if
// none), including before a Suspend. An ack above it, and above what the target
// reported at its handshake, is bogus.
func (q *Queue) LastSent() types.LSN { return q.lastSent }

// Config returns the queue's configuration with defaults filled in.
func (q *Queue) Config() Config { return q.cfg }

// Push queues m in the normal queue (fromMain) or the catchup queue
// (recovery stream), if term is the current term and the queue is not in S
// and the inner queue has room. It changes nothing unless it returns Pushed.
//
// Within a term the LSNs pushed into each inner queue must strictly increase,
// and a catchup push is only legal in RF (the recovery fetcher of this term
// has not called FetchingCompleted yet); a violation panics.
func (q *Queue) Push(m Msg, fromMain bool, term types.Term) PushResult {
	if term != q.term {
		return DroppedStale
	}
	if q.state == Suspended {
		return DroppedSuspended
	}
	f, last := &q.normal, &q.lastNormal
	if !fromMain {
		if q.state != RecoveryFetching {
			panic(fmt.Sprintf("targetqueue: catchup push of LSN %d in state %s (term %d)", m.LSN, q.state, q.term))
		}
		f, last = &q.catchup, &q.lastCatchup
	}
	if m.LSN <= *last {
		panic(fmt.Sprintf("targetqueue: push of LSN %d after LSN %d (fromMain=%t, term %d)", m.LSN, *last, fromMain, q.term))
	}
	if m.Bytes < 0 {
		panic(fmt.Sprintf("targetqueue: push of LSN %d with negative size %d", m.LSN, m.Bytes))
	}
	if f.len() >= q.cfg.MaxCount || (f.len() > 0 && f.bytes+m.Bytes > q.cfg.MaxBytes) {
		return Overflow
	}
	f.push(m)
	*last = m.LSN
	return Pushed
}

// Front returns the next message to send: the catchup queue's front in RF or
// FC, the normal queue's front in N, nothing in S or when that queue is empty.
func (q *Queue) Front() (Msg, bool) {
	switch q.state {
	case RecoveryFetching, FetchingCompleted:
		if q.catchup.len() > 0 {
			return q.catchup.front(), true
		}
	case Normal:
		if q.normal.len() > 0 {
			return q.normal.front(), true
		}
	}
	return Msg{}, false
}

// Pop removes the message Front returns. In FC, popping the last catchup
// message moves the queue to N. Pop without a front panics.
func (q *Queue) Pop() {
	switch q.state {
	case RecoveryFetching, FetchingCompleted:
		if q.catchup.len() == 0 {
			panic(fmt.Sprintf("targetqueue: pop of empty catchup queue in state %s (term %d)", q.state, q.term))
		}
		q.catchup.pop()
		if q.state == FetchingCompleted && q.catchup.len() == 0 {
			q.state = Normal
		}
	case Normal:
		if q.normal.len() == 0 {
			panic(fmt.Sprintf("targetqueue: pop of empty normal queue (term %d)", q.term))
		}
		q.normal.pop()
	default:
		panic(fmt.Sprintf("targetqueue: pop in state %s (term %d)", q.state, q.term))
	}
}

// Suspend clears both queues and the in-flight list and moves to S: the
// target is down. The term does not change; Return bumps it.
func (q *Queue) Suspend() {
	q.normal.reset()
	q.catchup.reset()
	q.inFlight.reset()
	q.state = Suspended
}

// Return records that the target came back (its handshake succeeded): term
// goes up by one, both queues and the in-flight list are cleared (whatever
// was in them belongs to the old stream), and the state becomes RF. Legal in
// any state (a reconnect implies the old stream is gone). It returns the new
// term.
func (q *Queue) Return() types.Term {
	q.normal.reset()
	q.catchup.reset()
	q.inFlight.reset()
	q.lastNormal, q.lastCatchup, q.lastSent = 0, 0, 0
	q.term++
	q.state = RecoveryFetching
	return q.term
}

// FetchingCompleted is called by the recovery fetcher of term when it has
// pushed its whole range. In RF with the current term it moves to N if the
// catchup queue is empty, else to FC, and returns true. Otherwise (stale
// term, or not in RF) it changes nothing and returns false.
func (q *Queue) FetchingCompleted(term types.Term) bool {
	if term != q.term || q.state != RecoveryFetching {
		return false
	}
	if q.catchup.len() == 0 {
		q.state = Normal
	} else {
		q.state = FetchingCompleted
	}
	return true
}

// NextBatch pops fronts while Front has one, up to maxCount messages and
// maxBytes payload bytes (at least one message if there is any, so a message
// larger than maxBytes still goes out alone), and records them in flight.
// It returns nil when nothing can be sent. maxCount < 1 panics.
func (q *Queue) NextBatch(maxCount int, maxBytes int64) []Msg {
	if maxCount < 1 {
		panic(fmt.Sprintf("targetqueue: NextBatch with maxCount %d", maxCount))
	}
	var batch []Msg
	var size int64
	for len(batch) < maxCount {
		m, ok := q.Front()
		if !ok || (len(batch) > 0 && size+m.Bytes > maxBytes) {
			break
		}
		if m.LSN <= q.lastSent {
			panic(fmt.Sprintf("targetqueue: sending LSN %d after LSN %d in term %d (state %s)", m.LSN, q.lastSent, q.term, q.state))
		}
		q.Pop()
		q.lastSent = m.LSN
		q.inFlight.push(m)
		batch = append(batch, m)
		size += m.Bytes
	}
	return batch
}

// Ack releases the in-flight messages with LSN <= lsn (the target's
// cumulative ack) and returns how many and their payload bytes.
func (q *Queue) Ack(lsn types.LSN) (count int, bytes int64) {
	for q.inFlight.len() > 0 && q.inFlight.front().LSN <= lsn {
		m := q.inFlight.pop()
		count++
		bytes += m.Bytes
	}
	return count, bytes
}

// Clone returns a deep copy of the queue's state. Messages are shared: a Msg
// and its slices are never modified once pushed. For tests that explore
// states (the conformance test) and for snapshots.
func (q *Queue) Clone() *Queue {
	c := *q
	// One allocation for the three fifos; the full slice expressions make
	// a later append reallocate instead of overwriting a neighbour.
	n, k, f := q.normal.len(), q.catchup.len(), q.inFlight.len()
	all := make([]Msg, 0, n+k+f)
	all = append(append(append(all, q.normal.msgs[q.normal.head:]...), q.catchup.msgs[q.catchup.head:]...), q.inFlight.msgs[q.inFlight.head:]...)
	c.normal = fifo{msgs: all[:n:n], bytes: q.normal.bytes}
	c.catchup = fifo{msgs: all[n : n+k : n+k], bytes: q.catchup.bytes}
	c.inFlight = fifo{msgs: all[n+k:], bytes: q.inFlight.bytes}
	return &c
}

// String is a canonical one-line description of the whole state (term,
// state, the LSNs in each inner queue and in flight, and the ordering
// watermarks): two queues with equal strings behave the same.
func (q *Queue) String() string {
	b := make([]byte, 0, 96)
	b = append(b, "term="...)
	b = strconv.AppendUint(b, uint64(q.term), 10)
	b = append(b, " state="...)
	b = append(b, q.state.String()...)
	b = append(b, " normal="...)
	b = q.normal.appendLSNs(b)
	b = append(b, " catchup="...)
	b = q.catchup.appendLSNs(b)
	b = append(b, " inflight="...)
	b = q.inFlight.appendLSNs(b)
	b = append(b, " last="...)
	b = strconv.AppendUint(b, uint64(q.lastNormal), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(q.lastCatchup), 10)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(q.lastSent), 10)
	return string(b)
}
