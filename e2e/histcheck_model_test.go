package e2e

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// modelEntry is one transaction of the model log.
type modelEntry struct {
	id     string
	slices []histSlice // sorted by topic, with the model's first offsets
}

// logBuf holds the transactions of model logs that share a prefix. A state
// sees entries[:head]; entries below any state's head never change, so
// states share one logBuf until two of them put different transactions at
// the same LSN (then the second copies its prefix).
type logBuf struct {
	entries []*modelEntry
}

// modelIndex maps an id to every LSN where some state of the check put it: a
// superset that each state checks against its own entries before believing
// it, so one index serves every logBuf of a check.
type modelIndex map[string][]uint64

func (ix modelIndex) add(id string, lsn uint64) {
	if !slices.Contains(ix[id], lsn) {
		ix[id] = append(ix[id], lsn)
	}
}

// checkCtx is what every state of one check shares. Porcupine steps one
// partition on one goroutine, and this model has one partition.
type checkCtx struct {
	at   modelIndex
	made map[*histOp]*modelEntry // each op's entry, reused by the branches that put it at the same LSN
}

// topicNext is a topic's next offset in a state.
type topicNext struct {
	topic string
	next  uint64
}

// logState is the model: an append-only log with dense LSNs and per-topic
// offsets. Immutable once built (porcupine keeps old states).
type logState struct {
	ctx  *checkCtx
	buf  *logBuf
	head uint64      // LSN of the last transaction; entries[:head] are this state's
	next []topicNext // sorted by topic; replaced, never modified
	// fp fingerprints (lsn, id) of every entry: equal states have equal
	// fingerprints, and different logs of one length almost never do.
	fp uint64
}

// nextOf is topic's next offset.
func (s *logState) nextOf(topic string) uint64 {
	i, ok := slices.BinarySearchFunc(s.next, topic, func(t topicNext, topic string) int { return strings.Compare(t.topic, topic) })
	if !ok {
		return 0
	}
	return s.next[i].next
}

// contains reports whether id is in the state's log, and where.
func (s *logState) contains(id string) (uint64, bool) {
	for _, lsn := range s.ctx.at[id] {
		if lsn <= s.head && s.buf.entries[lsn-1].id == id {
			return lsn, true
		}
	}
	return 0, false
}

// appended returns the state with e at LSN head+1; e's slices already carry
// the model's offsets.
func (s *logState) appended(e *modelEntry) *logState {
	lsn := s.head + 1
	buf := s.buf
	switch {
	case uint64(len(buf.entries)) == s.head:
		buf.entries = append(buf.entries, e)
	case buf.entries[s.head] == e:
		// another branch already put this very transaction here
	default:
		buf = &logBuf{entries: append(slices.Clip(slices.Clone(buf.entries[:s.head])), e)}
	}
	s.ctx.at.add(e.id, lsn)
	next := slices.Clone(s.next)
	for _, sl := range e.slices {
		i, ok := slices.BinarySearchFunc(next, sl.Topic, func(t topicNext, topic string) int { return strings.Compare(t.topic, topic) })
		if !ok {
			next = slices.Insert(next, i, topicNext{topic: sl.Topic})
		}
		next[i].next = sl.FirstOffset + uint64(sl.Messages)
	}
	return &logState{ctx: s.ctx, buf: buf, head: lsn, next: next, fp: s.fp + fpMix(lsn, e.id)}
}

// fpMix hashes one (lsn, id) pair for the fingerprint (splitmix64 finaliser
// over FNV-1a of the id).
func fpMix(lsn uint64, id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	x := h.Sum64() ^ (lsn * 0x9e3779b97f4a7c15)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// entryOf is op's transaction placed at s's next LSN (the model's offsets).
// Each op gets one entry, made once, so branches that place the same op at
// the same LSN share it.
func (s *logState) entryOf(op *histOp) *modelEntry {
	made := s.ctx.made
	if e := made[op]; e != nil && s.head < uint64(len(s.buf.entries)) && s.buf.entries[s.head] == e {
		return e
	}
	e := &modelEntry{id: op.ID, slices: slices.Clone(op.Slices)}
	for i := range e.slices {
		e.slices[i].FirstOffset = s.nextOf(e.slices[i].Topic)
	}
	made[op] = e
	return e
}

// sameSortedSlices compares a transaction's slices (both sorted by topic).
func sameSortedSlices(a, b []histSlice) bool {
	return slices.Equal(a, b)
}

// step returns the states s can move to by op (none: op cannot happen in s).
func (s *logState) step(op *histOp) []*logState {
	switch op.Kind {
	case opAppend:
		lsn, in := s.contains(op.ID)
		switch {
		case op.Outcome == outcomeUnknown:
			if in {
				return []*logState{s} // a retry the producer table absorbed
			}
			return []*logState{s, s.appended(s.entryOf(op))}
		case op.Duplicate:
			// answered from the producer table: the first attempt's result
			if in && lsn == op.LSN && sameSortedSlices(s.buf.entries[lsn-1].slices, op.Slices) {
				return []*logState{s}
			}
			return nil
		case in || op.LSN != s.head+1:
			return nil
		}
		e := s.entryOf(op)
		if !sameSortedSlices(e.slices, op.Slices) {
			return nil // offsets that do not follow on
		}
		return []*logState{s.appended(e)}
	case opRead:
		last := op.From + uint64(len(op.Txns)) - 1 // From-1 when empty
		if last > s.head || (op.ToHead && last != s.head) {
			return nil
		}
		for _, t := range op.Txns {
			e := s.buf.entries[t.LSN-1]
			if e.id != t.ID || !sameSortedSlices(e.slices, t.Slices) {
				return nil
			}
		}
		return []*logState{s}
	}
	return nil
}

// logModel is the porcupine model of the log, for one check.
func logModel() porcupine.Model {
	ctx := &checkCtx{at: modelIndex{}, made: map[*histOp]*modelEntry{}}
	nm := porcupine.NondeterministicModel{
		Init: func() []any {
			return []any{&logState{ctx: ctx, buf: &logBuf{}}}
		},
		Step: func(state, input, _ any) []any {
			next := state.(*logState).step(input.(*histOp))
			out := make([]any, len(next))
			for i, n := range next {
				out[i] = n
			}
			return out
		},
		Equal: func(a, b any) bool {
			x, y := a.(*logState), b.(*logState)
			return x.head == y.head && x.fp == y.fp
		},
		Hash: func(state any) uint64 {
			s := state.(*logState)
			return s.fp ^ s.head
		},
		DescribeOperation: func(input, _ any) string { return describeOp(input.(*histOp)) },
		DescribeState: func(state any) string {
			s := state.(*logState)
			if s.head == 0 {
				return "empty log"
			}
			return fmt.Sprintf("head %d: %s", s.head, s.buf.entries[s.head-1].id)
		},
	}
	return nm.ToModel()
}

func describeSlices(ss []histSlice, offsets bool) string {
	var parts []string
	for _, s := range ss {
		if offsets {
			parts = append(parts, fmt.Sprintf("%s@%d+%d", s.Topic, s.FirstOffset, s.Messages))
		} else {
			parts = append(parts, fmt.Sprintf("%s+%d", s.Topic, s.Messages))
		}
	}
	return strings.Join(parts, " ")
}

func describeOp(op *histOp) string {
	switch op.Kind {
	case opAppend:
		switch {
		case op.Outcome == outcomeUnknown:
			return fmt.Sprintf("append %s [%s] -> unknown", op.ID, describeSlices(op.Slices, false))
		case op.Duplicate:
			return fmt.Sprintf("append %s -> lsn %d (duplicate) [%s]", op.ID, op.LSN, describeSlices(op.Slices, true))
		}
		return fmt.Sprintf("append %s -> lsn %d [%s]", op.ID, op.LSN, describeSlices(op.Slices, true))
	case opRead:
		to := fmt.Sprint(op.To)
		if op.ToHead {
			to = "head"
		}
		var ids []string
		for _, t := range op.Txns {
			ids = append(ids, fmt.Sprintf("%d:%s", t.LSN, t.ID))
		}
		return fmt.Sprintf("read [%d, %s] -> %d txns {%s}", op.From, to, len(op.Txns), strings.Join(ids, " "))
	}
	return "?"
}
