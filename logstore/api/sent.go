package api

import (
	"sync"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Sent holds the entries a node's Aggregator encoded and handed to Raft
// and that have not resolved yet, decoded: the Entry each was marshalled
// from. On the leader, Raft hands its FSM the very byte slice the
// Aggregator passed to Apply, so the FSM can take the Entry it was built
// from (Take) instead of decoding the bytes just encoded
// (docs/BENCHMARKS.md, "Serial path").
//
// The bytes stay the truth: an entry is found only by the identity of its
// byte slice (same backing array, same length), which Raft never
// modifies, and the Entry marshalled to exactly those bytes; decoding them
// yields an equal message (proto3: an empty and an absent bytes or
// repeated field differ only as nil and empty, and apply treats them
// alike: logstore/fsm/apply_test.go TestApplyOfTheBuiltEntryMatchesDecoded).
// A follower, a replay after restart or a snapshot restore finds nothing
// and decodes as before. The Aggregator must not modify an Entry, nor the
// commands in it, once it has put it here.
//
// Safe for concurrent use: Put and Drop on the Aggregator's goroutines,
// Take on Raft's FSM goroutine. It holds at most MaxInflightEntries
// entries (every Put is dropped when its future resolves).
type Sent struct {
	mu sync.Mutex
	m  map[*byte]sentEntry
}

type sentEntry struct {
	n int // len of the bytes
	e *logstorepb.Entry
}

// NewSent returns an empty Sent.
func NewSent() *Sent { return &Sent{m: map[*byte]sentEntry{}} }

// Put records that data is e marshalled. data must not be empty.
func (s *Sent) Put(data []byte, e *logstorepb.Entry) {
	s.mu.Lock()
	s.m[&data[0]] = sentEntry{n: len(data), e: e}
	s.mu.Unlock()
}

// Drop forgets data's entry (resolved; Take may have taken it already).
func (s *Sent) Drop(data []byte) {
	s.mu.Lock()
	delete(s.m, &data[0])
	s.mu.Unlock()
}

// Take returns and forgets the Entry data was marshalled from, or nil
// when data is not a slice this node's Aggregator sent (decode it).
func (s *Sent) Take(data []byte) *logstorepb.Entry {
	if s == nil || len(data) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &data[0]
	se, ok := s.m[k]
	if !ok || se.n != len(data) {
		return nil
	}
	delete(s.m, k)
	return se.e
}
