package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// ErrCorruptState marks FSM state bytes (in a snapshot) that do not decode.
var ErrCorruptState = errors.New("logstore: corrupt FSM state")

// groupKey names one consumer group's position in one topic.
type groupKey struct{ group, topic string }

// compare orders keys by group, then topic: the order of the snapshot's
// GroupOffsets.
func (a groupKey) compare(b groupKey) int {
	return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.topic, b.topic))
}

// State is everything the FSM knows besides the segment log. It is changed
// only by Machine.Apply and replaced by a restore; its invariants:
//   - lastLSN is the LSN of the last transaction appended to the segment log;
//   - topics[t] is the next offset of topic t (dense: the sum of message
//     counts of every committed slice of t);
//   - lastTimestamp never decreases (entries are clamped to it).
//
// Its read methods return copies or scalars, safe to keep after the
// caller's lock is released.
type State struct {
	lastLSN       types.LSN
	lastIndex     uint64
	lastTimestamp int64
	lastSweep     int64
	epoch         types.Epoch
	topics        map[string]types.Offset
	producers     map[string]*logstorepb.ProducerState
	groups        map[groupKey]types.Offset
	consumers     map[string]types.LSN
	members       map[string]*logstorepb.MemberCommand
	// clusterVersion is the committed cluster version (0: BaseVersion).
	clusterVersion uint32
	group          groupState // PlayerGroup registry and membership (group.go)
	// decls are the topic declarations (topics.go).
	decls topicDecls
	// Registered producers (producer.go): rows by id, ids by name (the
	// two agree), and the last id handed out (ids are never reused).
	registered     map[uint64]*logstorepb.ProducerRow
	producerNames  map[string]uint64
	lastProducerID uint64
	// The log's identity (identity.go).
	logClusterID, logIncarnation string
	logIdentityStale             bool
}

// NewState returns the empty state (no entry applied).
func NewState() *State {
	return &State{
		topics:    map[string]types.Offset{},
		producers: map[string]*logstorepb.ProducerState{},
		groups:    map[groupKey]types.Offset{},
		consumers: map[string]types.LSN{},
		members:   map[string]*logstorepb.MemberCommand{},
		group:     newGroupState(),

		registered:    map[uint64]*logstorepb.ProducerRow{},
		producerNames: map[string]uint64{},
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

// LastLSN is the LSN of the last transaction applied.
func (s *State) LastLSN() types.LSN { return s.lastLSN }

// LastIndex is the Raft index of the last entry applied.
func (s *State) LastIndex() uint64 { return s.lastIndex }

// Epoch is the delivery epoch (the count of NextEpoch commands applied).
func (s *State) Epoch() types.Epoch { return s.epoch }

// NextOffset is topic's next offset (0 for a topic never written).
func (s *State) NextOffset(topic string) types.Offset { return s.topics[topic] }

// Topics returns every topic's next offset, sorted by topic.
func (s *State) Topics() []*logstorepb.TopicState {
	out := make([]*logstorepb.TopicState, 0, len(s.topics))
	for _, t := range sortedKeys(s.topics) {
		out = append(out, &logstorepb.TopicState{Topic: t, NextOffset: uint64(s.topics[t])})
	}
	return out
}

// Consumers returns every delivery consumer's acked LSN, sorted by name.
func (s *State) Consumers() []*logstorepb.Consumer {
	out := make([]*logstorepb.Consumer, 0, len(s.consumers))
	for _, c := range sortedKeys(s.consumers) {
		out = append(out, &logstorepb.Consumer{Consumer: c, AckedLsn: uint64(s.consumers[c])})
	}
	return out
}

// Member returns the registered member id (nil when unknown). The row is
// shared with the state: do not modify it.
func (s *State) Member(id string) *logstorepb.MemberCommand { return s.members[id] }

// Members returns a copy of the member table (the rows are shared: do not
// modify them).
func (s *State) Members() map[string]*logstorepb.MemberCommand { return maps.Clone(s.members) }

// GroupOffsetRows is the number of (group, topic) committed offsets held.
func (s *State) GroupOffsetRows() int { return len(s.groups) }

// ToProto returns a deep-enough copy of s as an FSMState with every list
// sorted by key (deterministic bytes). The producer rows are cloned so the
// snapshot can be persisted while apply goes on.
func (s *State) ToProto() *logstorepb.FSMState {
	out := &logstorepb.FSMState{
		LastLsn:                   uint64(s.lastLSN),
		LastRaftIndex:             s.lastIndex,
		LastTimestampUnixNano:     s.lastTimestamp,
		LastProducerSweepUnixNano: s.lastSweep,
		Epoch:                     uint64(s.epoch),
		Topics:                    s.Topics(),
		Consumers:                 s.Consumers(),
		ClusterVersion:            s.clusterVersion,
		TopicDeclarations:         s.decls.toProto(),
		RegisteredProducers:       s.registeredToProto(),
		LastProducerId:            s.lastProducerID,
	}
	for _, p := range sortedKeys(s.producers) {
		out.Producers = append(out.Producers, proto.Clone(s.producers[p]).(*logstorepb.ProducerState))
	}
	for _, k := range slices.SortedFunc(maps.Keys(s.groups), groupKey.compare) {
		out.GroupOffsets = append(out.GroupOffsets, &logstorepb.OffsetCommit{Group: k.group, Topic: k.topic, Offset: uint64(s.groups[k])})
	}
	for _, m := range sortedKeys(s.members) {
		out.Members = append(out.Members, proto.Clone(s.members[m]).(*logstorepb.MemberCommand))
	}
	s.groupToProto(out)
	s.identityToProto(out)
	return out
}

// MarshalState encodes p as the snapshot's state bytes (state.bin and the
// archive's state part): deterministic, so equal states give equal bytes.
func MarshalState(p *logstorepb.FSMState) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(p)
}

// UnmarshalState decodes state bytes written by MarshalState.
func UnmarshalState(b []byte) (*State, error) {
	var p logstorepb.FSMState
	if err := proto.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	return StateFromProto(&p)
}

// StateFromProto rebuilds a state from a snapshot's FSMState; it takes
// ownership of p's rows.
func StateFromProto(p *logstorepb.FSMState) (*State, error) {
	s := NewState()
	s.lastLSN, s.lastIndex = types.LSN(p.LastLsn), p.LastRaftIndex
	s.lastTimestamp, s.lastSweep = p.LastTimestampUnixNano, p.LastProducerSweepUnixNano
	s.epoch = types.Epoch(p.Epoch)
	if p.ClusterVersion > CurrentVersion {
		return nil, fmt.Errorf("%w: state at cluster version %d, this binary supports up to %d: upgrade it", ErrCorruptState, p.ClusterVersion, CurrentVersion)
	}
	s.clusterVersion = p.ClusterVersion
	for _, t := range p.Topics {
		s.topics[t.Topic] = types.Offset(t.NextOffset)
	}
	if err := s.decls.restore(p.TopicDeclarations); err != nil {
		return nil, err
	}
	for _, pr := range p.Producers {
		if pr.ProducerId == "" || (pr.Result == nil) == (pr.Error == nil) || !validDigest(pr.Digest) {
			return nil, fmt.Errorf("%w: producer row %q has no id, not exactly one result, or a digest of %d bytes", ErrCorruptState, pr.ProducerId, len(pr.Digest))
		}
		s.producers[pr.ProducerId] = pr
	}
	if err := s.registeredFromProto(p); err != nil {
		return nil, err
	}
	for _, g := range p.GroupOffsets {
		s.groups[groupKey{g.Group, g.Topic}] = types.Offset(g.Offset)
	}
	for _, c := range p.Consumers {
		s.consumers[c.Consumer] = types.LSN(c.AckedLsn)
	}
	for _, m := range p.Members {
		s.members[m.Id] = m
	}
	if err := s.groupFromProto(p); err != nil {
		return nil, err
	}
	s.identityFromProto(p)
	return s, nil
}

// MinConsumerLSN is the retention floor: the lowest acked LSN of any
// registered delivery consumer, and false when there is none.
func (s *State) MinConsumerLSN() (types.LSN, bool) {
	first := true
	var lowest types.LSN
	for _, lsn := range s.consumers {
		if first || lsn < lowest {
			lowest, first = lsn, false
		}
	}
	return lowest, !first
}

// deleteGroup removes every committed offset of group and returns how many
// (order-free: deletes only).
func (s *State) deleteGroup(group string) uint64 {
	var n uint64
	for k := range s.groups {
		if k.group == group {
			delete(s.groups, k)
			n++
		}
	}
	return n
}

// GroupOffsets returns group's committed offsets for topics (all when
// empty), sorted by topic.
func (s *State) GroupOffsets(group string, topics []string) []*logstorepb.OffsetCommit {
	var out []*logstorepb.OffsetCommit
	for k, off := range s.groups {
		if k.group == group && (len(topics) == 0 || slices.Contains(topics, k.topic)) {
			out = append(out, &logstorepb.OffsetCommit{Group: group, Topic: k.topic, Offset: uint64(off)})
		}
	}
	slices.SortFunc(out, func(a, b *logstorepb.OffsetCommit) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}
