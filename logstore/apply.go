package logstore

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// ErrCorruptState marks FSM state bytes (in a snapshot) that do not decode.
var ErrCorruptState = errors.New("logstore: corrupt FSM state")

// producerSweepEvery is how often, in log time, apply drops idle producers:
// a sweep scans the whole table, so it runs at most once a minute of log
// time instead of on every entry.
const producerSweepEvery = time.Minute

// The legacy limits: what every node applied before the leader stamped
// ApplyLimits into entries (the defaults of the time; cluster-wide caps did
// not exist). An entry without limits, or a zero field, applies with these,
// so a replayed old entry does what it did when first applied. Never change
// them.
const (
	legacyMaxProducers    = 10000
	legacyProducerIdle    = 24 * time.Hour
	legacyMaxConsumers    = 0 // unbounded
	legacyMaxGroupOffsets = 0 // unbounded
)

// maxLimit clamps a stamped count so it fits an int on every platform.
const maxLimit = 1 << 31

// limits are the bounds one entry is applied with (ApplyLimits decoded);
// a zero cap is no cap.
type limits struct {
	maxProducers    int
	producerIdle    time.Duration
	maxConsumers    int
	maxGroupOffsets int
}

// limitsOf decodes an entry's stamped limits (nil: all legacy).
func limitsOf(l *logstorepb.ApplyLimits) limits {
	count := func(v uint64, legacy int) int {
		if v == 0 {
			return legacy
		}
		return int(min(v, maxLimit))
	}
	out := limits{
		maxProducers:    count(l.GetMaxProducers(), legacyMaxProducers),
		producerIdle:    legacyProducerIdle,
		maxConsumers:    count(l.GetMaxConsumers(), legacyMaxConsumers),
		maxGroupOffsets: count(l.GetMaxGroupOffsets(), legacyMaxGroupOffsets),
	}
	if d := l.GetProducerIdleExpiryNanos(); d > 0 {
		out.producerIdle = time.Duration(d)
	}
	return out
}

// full reports whether a table of n rows with cap limit (0: none) has no
// room for added more rows.
func full(n, added, limit int) bool { return limit > 0 && n+added > limit }

// tableFull is apply's refusal of rows beyond a table's cap:
// RESOURCE_EXHAUSTED / TABLE_FULL with limit = the cap. Nothing was
// changed; the request may succeed once rows are removed (clients do not
// retry it, unlike QUEUE_FULL).
func tableFull(table string, n, limit int) error {
	return apierr.New(logstorepb.ErrorCode_TABLE_FULL,
		fmt.Sprintf("%s table is full: %d rows, cap %d", table, n, limit),
		func(d *logstorepb.ErrorDetail) { d.Limit = uint64(limit) })
}

// txnAppender is what apply needs from the segment log: append the next
// transactions (the first's Lsn == last LSN + 1, then dense), visible to
// readers when it returns, no fsync. Apply hands it every transaction of
// one Raft entry at once (one write call instead of one per transaction).
type txnAppender interface {
	AppendBatch(txns []*logstorepb.Transaction) error
}

// cmdResult is the outcome of one Command: exactly one of resp and err.
// err is an apierr status error.
type cmdResult struct {
	resp proto.Message
	err  error
}

// stateMachine is the deterministic core of the FSM: a plain, synchronous
// type that applies one Raft entry at a time to state and the segment log.
// Its output depends only on its state and the entry's bytes (commands,
// timestamp, limits); it never reads a clock or the node's configuration,
// iterates a map to decide anything, or draws randomness, so every replica
// writes the same bytes.
type stateMachine struct {
	st  *state
	log txnAppender
	lim limits // the current entry's
	// txns collects the entry's transactions for one AppendBatch (reused).
	txns []*logstorepb.Transaction
}

// applyEntry applies every command of e (the payload of Raft log index idx)
// in order, appends the entry's transactions to the segment log together,
// and returns one result per command. It panics when the segment log
// refuses a write: the replica can no longer follow the log and must
// restart and re-apply from its last snapshot.
func (m *stateMachine) applyEntry(idx uint64, e *logstorepb.Entry) []cmdResult {
	st := m.st
	if idx <= st.lastIndex {
		panic(fmt.Sprintf("logstore: apply raft index %d not above last applied %d", idx, st.lastIndex))
	}
	ts := max(e.TimestampUnixNano, st.lastTimestamp)
	st.lastTimestamp, st.lastIndex = ts, idx
	m.lim = limitsOf(e.Limits)
	m.sweepProducers(ts)
	out := make([]cmdResult, len(e.Commands))
	for i, c := range e.Commands {
		switch k := c.Kind.(type) {
		case *logstorepb.Command_Append:
			resp, err := m.applyAppend(idx, ts, k.Append)
			out[i] = cmdResult{resp: resp, err: err}
		case *logstorepb.Command_NextEpoch:
			st.epoch++
			out[i] = cmdResult{resp: &logstorepb.NextEpochResponse{Epoch: st.epoch}}
		case *logstorepb.Command_ReportConsumer:
			out[i] = m.applyReportConsumer(k.ReportConsumer)
		case *logstorepb.Command_DeleteGroup:
			out[i] = cmdResult{resp: &logstorepb.DeleteGroupResponse{Removed: st.deleteGroup(k.DeleteGroup.Group)}}
		case *logstorepb.Command_Member:
			if k.Member.Remove {
				delete(st.members, k.Member.Id)
			} else {
				st.members[k.Member.Id] = k.Member
			}
			out[i] = cmdResult{resp: &logstorepb.AddVoterResponse{}}
		default:
			panic(fmt.Sprintf("logstore: raft index %d command %d has unknown kind %T", idx, i, c.Kind))
		}
	}
	if len(m.txns) > 0 {
		if err := m.log.AppendBatch(m.txns); err != nil {
			panic(fmt.Sprintf("logstore: segment append lsn %d..%d raft index %d: %v", m.txns[0].Lsn, m.txns[len(m.txns)-1].Lsn, idx, err))
		}
		clear(m.txns)
		m.txns = m.txns[:0]
	}
	return out
}

// applyReportConsumer sets or removes a delivery consumer's acked LSN. A
// new consumer beyond the cap is refused (nothing changes).
func (m *stateMachine) applyReportConsumer(r *logstorepb.ReportConsumerRequest) cmdResult {
	st := m.st
	if r.Remove {
		delete(st.consumers, r.Consumer)
		return cmdResult{resp: &logstorepb.ReportConsumerResponse{}}
	}
	if _, ok := st.consumers[r.Consumer]; !ok && full(len(st.consumers), 1, m.lim.maxConsumers) {
		return cmdResult{err: tableFull("consumer", len(st.consumers), m.lim.maxConsumers)}
	}
	// Set, not max: a target rebuilt from scratch may move back, and a
	// stale report only retains more.
	st.consumers[r.Consumer] = r.AckedLsn
	return cmdResult{resp: &logstorepb.ReportConsumerResponse{}}
}

// sweepProducers drops producers idle for longer than the entry's
// producerIdle in log time, at most once per producerSweepEvery of log
// time.
func (m *stateMachine) sweepProducers(ts int64) {
	st := m.st
	if ts-st.lastSweep < int64(producerSweepEvery) {
		return
	}
	st.lastSweep = ts
	cutoff := ts - int64(m.lim.producerIdle)
	for id, p := range st.producers { // order-free: deletes only
		if p.LastSeenUnixNano < cutoff {
			delete(st.producers, id)
		}
	}
}

// applyAppend applies one AppendRequest: producer dedupe, room in the group
// offset table, conditions, then the write. A request refused for room
// changes nothing (TABLE_FULL; the producer's sequence is not consumed); one refused by a condition changes
// nothing but the producer row.
func (m *stateMachine) applyAppend(idx uint64, ts int64, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	st := m.st
	if req.ProducerId == "" {
		if err := m.groupRoom(req.OffsetCommits); err != nil {
			return nil, err
		}
		return m.write(idx, ts, req)
	}
	p := st.producers[req.ProducerId]
	expected := uint64(1)
	if p != nil {
		expected = p.LastSequence + 1
		if req.Sequence == p.LastSequence {
			p.LastSeenUnixNano = ts
			return storedResult(p)
		}
	}
	if req.Sequence != expected {
		return nil, apierr.New(logstorepb.ErrorCode_SEQUENCE_MISMATCH,
			fmt.Sprintf("producer %q: sequence %d, expected %d", req.ProducerId, req.Sequence, expected),
			func(d *logstorepb.ErrorDetail) { d.ExpectedSequence = expected })
	}
	if err := m.groupRoom(req.OffsetCommits); err != nil {
		return nil, err
	}
	resp, err := m.write(idx, ts, req)
	if p == nil {
		m.makeRoomForProducer()
		p = &logstorepb.ProducerState{ProducerId: req.ProducerId}
		st.producers[req.ProducerId] = p
	}
	p.LastSequence, p.LastSeenUnixNano = req.Sequence, ts
	p.Result, p.Error, p.ErrorMessage = resp, nil, ""
	if err != nil {
		p.Result, p.Error = nil, apierr.Detail(err)
		p.ErrorMessage = statusMessage(err)
	}
	return resp, err
}

// groupRoom refuses offset commits that would add (group, topic) rows
// beyond the cap.
func (m *stateMachine) groupRoom(commits []*logstorepb.OffsetCommit) error {
	if m.lim.maxGroupOffsets == 0 || len(commits) == 0 {
		return nil
	}
	added := 0
	for i, oc := range commits {
		if _, ok := m.st.groups[groupKey{oc.Group, oc.Topic}]; ok {
			continue
		}
		if !slices.ContainsFunc(commits[:i], func(p *logstorepb.OffsetCommit) bool { return p.Group == oc.Group && p.Topic == oc.Topic }) {
			added++
		}
	}
	if full(len(m.st.groups), added, m.lim.maxGroupOffsets) {
		return tableFull("group offset", len(m.st.groups), m.lim.maxGroupOffsets)
	}
	return nil
}

// makeRoomForProducer evicts the least recently seen producers (ties: the
// smallest id, so the choice is the same on every replica) until a new one
// fits: one when the table is full, more when a leader with a smaller
// MaxProducers took over.
func (m *stateMachine) makeRoomForProducer() {
	st := m.st
	excess := len(st.producers) - m.lim.maxProducers + 1
	if excess <= 0 {
		return
	}
	older := func(a, b *logstorepb.ProducerState) int {
		return cmp.Or(cmp.Compare(a.LastSeenUnixNano, b.LastSeenUnixNano), strings.Compare(a.ProducerId, b.ProducerId))
	}
	if excess == 1 { // the usual case: one linear scan
		var victim *logstorepb.ProducerState
		for _, p := range st.producers {
			if victim == nil || older(p, victim) < 0 {
				victim = p
			}
		}
		delete(st.producers, victim.ProducerId)
		return
	}
	all := make([]*logstorepb.ProducerState, 0, len(st.producers))
	for _, p := range st.producers {
		all = append(all, p)
	}
	slices.SortFunc(all, older)
	for _, p := range all[:excess] {
		delete(st.producers, p.ProducerId)
	}
}

// storedResult answers a producer retry with the first result.
func storedResult(p *logstorepb.ProducerState) (*logstorepb.AppendResponse, error) {
	if p.Error != nil {
		d := proto.Clone(p.Error).(*logstorepb.ErrorDetail)
		return nil, apierr.New(d.Code, p.ErrorMessage, func(out *logstorepb.ErrorDetail) { proto.Merge(out, d) })
	}
	resp := proto.Clone(p.Result).(*logstorepb.AppendResponse)
	resp.Duplicate = true
	return resp, nil
}

// write checks req's conditions and, when they hold, appends it as the next
// transaction.
func (m *stateMachine) write(idx uint64, ts int64, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	st := m.st
	for _, c := range req.Conditions {
		if c.Group != "" { // on the group's committed offset, checked before this txn's commits
			if actual := st.groups[groupKey{c.Group, c.Topic}]; actual != c.ExpectedNextOffset {
				return nil, apierr.New(logstorepb.ErrorCode_CONDITION_FAILED,
					fmt.Sprintf("group %q topic %q: committed offset is %d, expected %d", c.Group, c.Topic, actual, c.ExpectedNextOffset),
					func(d *logstorepb.ErrorDetail) { d.Group, d.Topic, d.ActualNextOffset = c.Group, c.Topic, actual })
			}
			continue
		}
		if actual := st.topics[c.Topic]; actual != c.ExpectedNextOffset {
			return nil, apierr.New(logstorepb.ErrorCode_CONDITION_FAILED,
				fmt.Sprintf("topic %q: next offset is %d, expected %d", c.Topic, actual, c.ExpectedNextOffset),
				func(d *logstorepb.ErrorDetail) { d.Topic, d.ActualNextOffset = c.Topic, actual })
		}
	}
	st.lastLSN++
	txn := &logstorepb.Transaction{
		Lsn:               st.lastLSN,
		RaftIndex:         idx,
		TimestampUnixNano: ts,
		Slices:            make([]*logstorepb.TxnSlice, len(req.Slices)),
		OffsetCommits:     req.OffsetCommits,
	}
	resp := &logstorepb.AppendResponse{Lsn: txn.Lsn, Slices: make([]*logstorepb.SliceResult, len(req.Slices))}
	for i, s := range req.Slices {
		first := st.topics[s.Topic]
		st.topics[s.Topic] = first + uint64(len(s.Messages))
		txn.Slices[i] = &logstorepb.TxnSlice{Topic: s.Topic, FirstOffset: first, Messages: s.Messages}
		resp.Slices[i] = &logstorepb.SliceResult{Topic: s.Topic, FirstOffset: first}
	}
	for _, oc := range req.OffsetCommits {
		st.groups[groupKey{oc.Group, oc.Topic}] = oc.Offset
	}
	m.txns = append(m.txns, txn) // written at the end of the entry
	return resp, nil
}

// statusMessage is the message of a status error without the "rpc error:"
// prefix.
func statusMessage(err error) string { return status.Convert(err).Message() }

// deleteGroup removes every committed offset of group and returns how many
// (order-free: deletes only).
func (s *state) deleteGroup(group string) uint64 {
	var n uint64
	for k := range s.groups {
		if k.group == group {
			delete(s.groups, k)
			n++
		}
	}
	return n
}

// groupOffsets returns group's committed offsets for topics (all when
// empty), sorted by topic.
func (s *state) groupOffsets(group string, topics []string) []*logstorepb.OffsetCommit {
	var out []*logstorepb.OffsetCommit
	for k, off := range s.groups {
		if k.group == group && (len(topics) == 0 || slices.Contains(topics, k.topic)) {
			out = append(out, &logstorepb.OffsetCommit{Group: group, Topic: k.topic, Offset: off})
		}
	}
	slices.SortFunc(out, func(a, b *logstorepb.OffsetCommit) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}
