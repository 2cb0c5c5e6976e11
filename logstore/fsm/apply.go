package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Log is what apply needs from the segment log: append the next
// transactions (the first's Lsn == last LSN + 1, then dense), visible to
// readers when it returns, no fsync. Apply hands it every transaction of
// one Raft entry at once (one write call instead of one per transaction).
type Log interface {
	AppendBatch(txns []*logstorepb.Transaction) error
}

// Result is the outcome of one Command: exactly one of Resp and Err.
// Err is an apierr status error (the command was refused and changed
// nothing but what its doc says, e.g. a producer's sequence).
type Result struct {
	Resp proto.Message
	Err  error
}

// Machine is the deterministic core of the FSM: a plain, synchronous
// type that applies one Raft entry at a time to its State and its Log. It
// is not safe for concurrent use: the caller (logstore's raft.FSM) runs
// Apply on one goroutine and guards State reads with its own lock.
// Its output depends only on its state and the entry's bytes (commands,
// timestamp, limits); it never reads a clock or the node's configuration,
// iterates a map to decide anything, or draws randomness, so every replica
// writes the same bytes.
type Machine struct {
	st  *State
	log Log
	lim Limits // the current entry's
	// txns collects the entry's transactions for one AppendBatch (reused).
	txns []*logstorepb.Transaction
	// rebalances counts rebalance runs (tests: what runs one).
	rebalances uint64
}

// NewMachine returns a Machine applying entries to st and log. st's
// lastLSN must be log's last LSN.
func NewMachine(st *State, log Log) *Machine { return &Machine{st: st, log: log} }

// State returns the machine's state (read it only between Applies).
func (m *Machine) State() *State { return m.st }

// SetState replaces the machine's state (a snapshot restore; the log
// must end at st's last LSN).
func (m *Machine) SetState(st *State) { m.st = st }

// Apply applies every command of e (the payload of Raft log index idx)
// in order, appends the entry's transactions to the segment log together,
// and returns one result per command. It panics when the segment log
// refuses a write: the replica can no longer follow the log and must
// restart and re-apply from its last snapshot.
func (m *Machine) Apply(idx uint64, e *logstorepb.Entry) []Result {
	st := m.st
	if idx <= st.lastIndex {
		panic(fmt.Sprintf("logstore: apply raft index %d not above last applied %d", idx, st.lastIndex))
	}
	ts, prev := max(e.TimestampUnixNano, st.lastTimestamp), st.lastTimestamp
	st.lastTimestamp, st.lastIndex = ts, idx
	m.lim = LimitsOf(e.Limits)
	m.sweepProducers(ts)
	m.graceAfterStall(prev, ts)
	m.expireGroupMembers(ts)
	out := make([]Result, len(e.Commands))
	for i, c := range e.Commands {
		// An unknown kind (from a newer leader) or one above the committed
		// cluster version is refused with no effect, the same on every
		// replica: see version.go.
		if err := Gate(st, c); err != nil {
			out[i] = Result{Err: err}
			continue
		}
		switch k := c.Kind.(type) {
		case *logstorepb.Command_Append:
			resp, err := m.applyAppend(idx, ts, k.Append)
			out[i] = Result{Resp: resp, Err: err}
		case *logstorepb.Command_NextEpoch:
			st.epoch++
			out[i] = Result{Resp: &logstorepb.NextEpochResponse{Epoch: uint64(st.epoch)}}
		case *logstorepb.Command_ReportConsumer:
			out[i] = m.applyReportConsumer(k.ReportConsumer)
		case *logstorepb.Command_DeleteGroup:
			out[i] = Result{Resp: &logstorepb.DeleteGroupResponse{Removed: st.deleteGroup(k.DeleteGroup.Group)}}
		case *logstorepb.Command_Member:
			if k.Member.Remove {
				delete(st.members, k.Member.Id)
			} else {
				st.members[k.Member.Id] = k.Member
			}
			out[i] = Result{Resp: &logstorepb.AddVoterResponse{}}
		case *logstorepb.Command_Group:
			out[i] = m.applyGroup(ts, k.Group)
		case *logstorepb.Command_InitProducer:
			out[i] = m.applyInitProducer(ts, k.InitProducer)
		case *logstorepb.Command_SetClusterVersion:
			out[i] = m.applySetClusterVersion(k.SetClusterVersion)
		case *logstorepb.Command_CreateTopic:
			out[i] = m.applyCreateTopic(k.CreateTopic)
		case *logstorepb.Command_SetLogIdentity:
			out[i] = m.applySetLogIdentity(k.SetLogIdentity)
		default: // a kind Gate lets through but this switch lacks: refuse, do not crash
			out[i] = Result{Err: apierr.Newf(logstorepb.ErrorCode_INTERNAL, "logstore: raft index %d command %d: kind %T not applied by this binary", idx, i, c.Kind)}
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
// new consumer beyond the cap is refused (nothing changes), and so is a
// report for a target that is not registered (unregisteredTarget).
func (m *Machine) applyReportConsumer(r *logstorepb.ReportConsumerRequest) Result {
	st := m.st
	if r.Remove {
		delete(st.consumers, r.Consumer)
		return Result{Resp: &logstorepb.ReportConsumerResponse{}}
	}
	if err := m.unregisteredTarget(r.Consumer); err != nil {
		return Result{Err: err}
	}
	if _, ok := st.consumers[r.Consumer]; !ok && full(len(st.consumers), 1, m.lim.MaxConsumers) {
		return Result{Err: tableFull("consumer", len(st.consumers), m.lim.MaxConsumers)}
	}
	// Set, not max: a target rebuilt from scratch may move back, and a
	// stale report only retains more.
	st.consumers[r.Consumer] = types.LSN(r.AckedLsn)
	return Result{Resp: &logstorepb.ReportConsumerResponse{}}
}

// sweepProducers drops producers idle for longer than the entry's
// ProducerIdleNanos in log time, at most once per
// producerSweepEveryNanos of log time.
func (m *Machine) sweepProducers(ts int64) {
	st := m.st
	if ts-st.lastSweep < producerSweepEveryNanos {
		return
	}
	st.lastSweep = ts
	cutoff := ts - m.lim.ProducerIdleNanos
	for id, p := range st.producers { // order-free: deletes only
		if p.LastSeenUnixNano < cutoff {
			delete(st.producers, id)
		}
	}
	st.sweepRegistered(cutoff)
}

// applyAppend applies one AppendRequest: producer dedupe first (a retry of
// a remembered sequence gets its first answer whatever changed since),
// then the topic table and room in the group offset table (checkNew),
// conditions, then the write. A request refused by checkNew changes
// nothing (the producer's sequence is not consumed); one refused by a
// condition changes nothing but the producer row.
func (m *Machine) applyAppend(idx uint64, ts int64, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	st := m.st
	if st.ClusterVersion() < AdmissionVersion {
		// Before AdmissionVersion apply checked the topics first, even of
		// a retry; a replica still at that version must do the same.
		if err := m.checkTopics(req); err != nil {
			return nil, err
		}
	}
	if registered(req) {
		return m.applyRegisteredAppend(idx, ts, req)
	}
	if req.ProducerId == "" {
		if err := m.checkNew(req); err != nil {
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
			return legacyRetry(p, req).append()
		}
	}
	if st.ClusterVersion() >= AdmissionVersion && !m.lim.AllowLegacyProducers {
		return nil, LegacyProducerRefused(req.ProducerId)
	}
	if req.Sequence != expected {
		return nil, apierr.New(logstorepb.ErrorCode_SEQUENCE_MISMATCH,
			fmt.Sprintf("producer %q: sequence %d, expected %d", req.ProducerId, req.Sequence, expected),
			func(d *logstorepb.ErrorDetail) { d.ExpectedSequence = expected })
	}
	if err := m.checkNew(req); err != nil {
		return nil, err
	}
	resp, err := m.write(idx, ts, req)
	if p == nil {
		m.makeRoomForProducer()
		p = &logstorepb.ProducerState{ProducerId: req.ProducerId}
		st.producers[req.ProducerId] = p
	}
	p.LastSequence, p.LastSeenUnixNano = req.Sequence, ts
	p.Result, p.Error, p.ErrorMessage, p.Digest = resp, nil, "", nil
	if st.ClusterVersion() >= producerVersion {
		// Kept (and so compared) only from version 3: a version-2 replica
		// would keep none and answer a reused sequence as a duplicate.
		p.Digest = RequestDigest(req)
	}
	if err != nil {
		p.Result, p.Error = nil, apierr.Detail(err)
		p.ErrorMessage = statusMessage(err)
	}
	return resp, err
}

// checkNew is apply's check of an Append that is not a retry, after the
// producer checks and before anything changes: the topic table (schemas,
// cap; from AdmissionVersion on, here rather than first) and room in the
// group offset table. Refused, the request changes nothing, not even its
// producer's sequence.
func (m *Machine) checkNew(req *logstorepb.AppendRequest) error {
	if m.st.ClusterVersion() >= AdmissionVersion {
		if err := m.checkTopics(req); err != nil {
			return err
		}
	}
	return m.groupRoom(req.OffsetCommits)
}

// legacyRetry answers a legacy producer's retry of its last sequence:
// the first result (a duplicate) or refusal, or SEQUENCE_REUSED when the
// content differs.
func legacyRetry(p *logstorepb.ProducerState, req *logstorepb.AppendRequest) Result {
	if reusedSequence(p.Digest, req) {
		return Result{Err: sequenceReused(fmt.Sprintf("producer %q", req.ProducerId), req.Sequence, p.LastSequence+1, p.Result, p.Error)}
	}
	resp, err := storedResult(p)
	return Result{Resp: resp, Err: err}
}

// groupRoom refuses offset commits that would add (group, topic) rows
// beyond the cap.
func (m *Machine) groupRoom(commits []*logstorepb.OffsetCommit) error {
	if m.lim.MaxGroupOffsets == 0 || len(commits) == 0 {
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
	if full(len(m.st.groups), added, m.lim.MaxGroupOffsets) {
		return tableFull("group offset", len(m.st.groups), m.lim.MaxGroupOffsets)
	}
	return nil
}

// makeRoomForProducer evicts the least recently seen producers (ties: the
// smallest id, so the choice is the same on every replica) until a new one
// fits: one when the table is full, more when a leader with a smaller
// MaxProducers took over.
func (m *Machine) makeRoomForProducer() {
	st := m.st
	excess := len(st.producers) - m.lim.MaxProducers + 1
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
func (m *Machine) write(idx uint64, ts int64, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	st := m.st
	for _, c := range req.Conditions {
		if c.Group != "" { // on the group's committed offset, checked before this txn's commits
			if actual := st.groups[groupKey{c.Group, c.Topic}]; actual != types.Offset(c.ExpectedNextOffset) {
				return nil, apierr.New(logstorepb.ErrorCode_CONDITION_FAILED,
					fmt.Sprintf("group %q topic %q: committed offset is %d, expected %d", c.Group, c.Topic, actual, c.ExpectedNextOffset),
					func(d *logstorepb.ErrorDetail) {
						d.Group, d.Topic, d.ActualNextOffset = c.Group, c.Topic, uint64(actual)
					})
			}
			continue
		}
		if actual := st.topics[c.Topic]; actual != types.Offset(c.ExpectedNextOffset) {
			return nil, apierr.New(logstorepb.ErrorCode_CONDITION_FAILED,
				fmt.Sprintf("topic %q: next offset is %d, expected %d", c.Topic, actual, c.ExpectedNextOffset),
				func(d *logstorepb.ErrorDetail) { d.Topic, d.ActualNextOffset = c.Topic, uint64(actual) })
		}
	}
	st.lastLSN++
	txn := &logstorepb.Transaction{
		Lsn:               uint64(st.lastLSN),
		RaftIndex:         idx,
		TimestampUnixNano: ts,
		Slices:            make([]*logstorepb.TxnSlice, len(req.Slices)),
		OffsetCommits:     req.OffsetCommits,
	}
	resp := &logstorepb.AppendResponse{Lsn: txn.Lsn, Slices: make([]*logstorepb.SliceResult, len(req.Slices))}
	for i, s := range req.Slices {
		first := st.topics[s.Topic]
		st.topics[s.Topic] = first + types.Offset(len(s.Messages))
		txn.Slices[i] = &logstorepb.TxnSlice{Topic: s.Topic, FirstOffset: uint64(first), Messages: s.Messages}
		resp.Slices[i] = &logstorepb.SliceResult{Topic: s.Topic, FirstOffset: uint64(first)}
	}
	for _, oc := range req.OffsetCommits {
		st.groups[groupKey{oc.Group, oc.Topic}] = types.Offset(oc.Offset)
	}
	m.txns = append(m.txns, txn) // written at the end of the entry
	return resp, nil
}

// statusMessage is the message of a status error without the "rpc error:"
// prefix.
func statusMessage(err error) string { return status.Convert(err).Message() }
