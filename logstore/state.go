package logstore

import (
	"cmp"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// groupKey names one consumer group's position in one topic.
type groupKey struct{ group, topic string }

// state is everything the FSM knows besides the segment log. It is changed
// only by stateMachine.applyEntry (on Raft's FSM goroutine) and by restore;
// its invariants:
//   - lastLSN is the LSN of the last transaction appended to the segment log;
//   - topics[t] is the next offset of topic t (dense: the sum of message
//     counts of every committed slice of t);
//   - lastTimestamp never decreases (entries are clamped to it).
type state struct {
	lastLSN       uint64
	lastIndex     uint64
	lastTimestamp int64
	lastSweep     int64
	epoch         uint64
	topics        map[string]uint64
	producers     map[string]*logstorepb.ProducerState
	groups        map[groupKey]uint64
	consumers     map[string]uint64
	members       map[string]*logstorepb.MemberCommand
}

func newState() *state {
	return &state{
		topics:    map[string]uint64{},
		producers: map[string]*logstorepb.ProducerState{},
		groups:    map[groupKey]uint64{},
		consumers: map[string]uint64{},
		members:   map[string]*logstorepb.MemberCommand{},
	}
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// toProto returns a deep-enough copy of s as an FSMState with every list
// sorted by key (deterministic bytes). The producer rows are cloned so the
// snapshot can be persisted while apply goes on.
func (s *state) toProto() *logstorepb.FSMState {
	out := &logstorepb.FSMState{
		LastLsn:                   s.lastLSN,
		LastRaftIndex:             s.lastIndex,
		LastTimestampUnixNano:     s.lastTimestamp,
		LastProducerSweepUnixNano: s.lastSweep,
		Epoch:                     s.epoch,
	}
	for _, t := range sortedKeys(s.topics) {
		out.Topics = append(out.Topics, &logstorepb.TopicState{Topic: t, NextOffset: s.topics[t]})
	}
	for _, p := range sortedKeys(s.producers) {
		out.Producers = append(out.Producers, proto.Clone(s.producers[p]).(*logstorepb.ProducerState))
	}
	keys := make([]groupKey, 0, len(s.groups))
	for k := range s.groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic))
	})
	for _, k := range keys {
		out.GroupOffsets = append(out.GroupOffsets, &logstorepb.OffsetCommit{Group: k.group, Topic: k.topic, Offset: s.groups[k]})
	}
	for _, c := range sortedKeys(s.consumers) {
		out.Consumers = append(out.Consumers, &logstorepb.Consumer{Consumer: c, AckedLsn: s.consumers[c]})
	}
	for _, m := range sortedKeys(s.members) {
		out.Members = append(out.Members, proto.Clone(s.members[m]).(*logstorepb.MemberCommand))
	}
	return out
}

// stateFromProto rebuilds a state from a snapshot's FSMState.
func stateFromProto(p *logstorepb.FSMState) (*state, error) {
	s := newState()
	s.lastLSN, s.lastIndex = p.LastLsn, p.LastRaftIndex
	s.lastTimestamp, s.lastSweep = p.LastTimestampUnixNano, p.LastProducerSweepUnixNano
	s.epoch = p.Epoch
	for _, t := range p.Topics {
		s.topics[t.Topic] = t.NextOffset
	}
	for _, pr := range p.Producers {
		if pr.ProducerId == "" || (pr.Result == nil) == (pr.Error == nil) {
			return nil, fmt.Errorf("%w: producer row %q has no id or not exactly one result", ErrCorruptState, pr.ProducerId)
		}
		s.producers[pr.ProducerId] = pr
	}
	for _, g := range p.GroupOffsets {
		s.groups[groupKey{g.Group, g.Topic}] = g.Offset
	}
	for _, c := range p.Consumers {
		s.consumers[c.Consumer] = c.AckedLsn
	}
	for _, m := range p.Members {
		s.members[m.Id] = m
	}
	return s, nil
}

// minConsumerLSN is the retention floor: the lowest acked LSN of any
// registered delivery consumer, and false when there is none.
func (s *state) minConsumerLSN() (uint64, bool) {
	first := true
	var lowest uint64
	for _, lsn := range s.consumers {
		if first || lsn < lowest {
			lowest, first = lsn, false
		}
	}
	return lowest, !first
}
