package fsm

import (
	"cmp"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Registered producers (InitProducer, cluster version 3; issue #12).
//
// A producer registers its name and gets an id and an epoch. The id is a
// counter that only grows (State.lastProducerID), so an id is never
// handed out twice: a request naming an id the table does not hold was
// either never registered or its row is gone, and it is refused
// (UNKNOWN_PRODUCER), never taken as a new producer starting at sequence 1
// (the legacy behaviour that let a retry after eviction write twice).
// Registering a known name again keeps its id, bumps its epoch, and
// restarts its sequences at 1: an older epoch gets PRODUCER_FENCED.
//
// Each row remembers the results of its last ProducerWindow sequences, so a
// producer may have that many Appends in flight: a retry of any of them
// gets its stored result (duplicate) when its content is the same (the
// row keeps a digest of each remembered request, digest.go) and
// SEQUENCE_REUSED when it is not, the next sequence is applied, a gap
// gets SEQUENCE_MISMATCH (expected_sequence: the next one), and a sequence
// older than the window gets SEQUENCE_TOO_OLD. None of the refusals writes
// anything or changes the row but its last-seen time.
//
// Bounds: the table holds at most MaxProducers rows. A new name when it is
// full reclaims the least recently seen row idle for longer than
// ProducerIdleNanos (such a row is also dropped by the periodic sweep), and
// otherwise is refused with TABLE_FULL: an active producer is never evicted
// to make room. When a leader with a smaller MaxProducers takes over, the
// table stays above the cap until idle rows expire (new names are refused
// meanwhile). The legacy (unregistered) table is separate and keeps its
// own bound and eviction.

// ProducerWindow is how many sequences' results a registered producer row
// remembers, and so how many Appends a producer may have in flight
// (Kafka's max.in.flight.requests.per.connection with idempotence).
// Changing it changes apply: it would need a cluster version.
const ProducerWindow = 5

// producerVersion is the cluster version registered producers need.
const producerVersion uint32 = 3

// RegisteredProducerID is how AppendRequest.producer_id carries a
// registered id: its decimal digits.
func RegisteredProducerID(id uint64) string { return strconv.FormatUint(id, 10) }

// ParseRegisteredProducerID is the inverse of RegisteredProducerID; ok is
// false for anything but the canonical decimal form of an id >= 1.
func ParseRegisteredProducerID(s string) (uint64, bool) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 || RegisteredProducerID(id) != s {
		return 0, false
	}
	return id, true
}

// LegacyProducerRefused is the refusal of an Append naming a legacy
// (unregistered) producer id when the cluster takes only registered
// producers (Limits.AllowLegacyProducers off): nothing is written, and the
// table gets no row. A retry of the one sequence a legacy row still
// remembers is answered first (apply and State.Retry), as any retry.
func LegacyProducerRefused(id string) error {
	return apierr.Newf(logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED,
		"producer_id %q without producer_epoch is a legacy producer id, which this cluster does not take: register the producer (InitProducer; client.Producer does) or run the stores with --allow-legacy-producers", id)
}

// registered reports whether req uses the registered-producer fields.
func registered(req *logstorepb.AppendRequest) bool { return req.GetProducerEpoch() != 0 }

// RegisteredProducers is the number of registered producer rows.
func (s *State) RegisteredProducers() int { return len(s.registered) }

// ProducerName returns the name registered under id, and whether the
// table holds id (the edge checks that the caller may use the name:
// logstore/api/producerauth.go).
func (s *State) ProducerName(id uint64) (string, bool) {
	if p := s.registered[id]; p != nil {
		return p.Name, true
	}
	return "", false
}

// applyInitProducer registers r.Name (see the package comment above).
func (m *Machine) applyInitProducer(ts int64, r *logstorepb.InitProducerRequest) Result {
	st := m.st
	if id, ok := st.producerNames[r.Name]; ok {
		p := st.registered[id]
		p.Epoch++
		p.LastSequence, p.Results, p.LastSeenUnixNano = 0, nil, ts
		return Result{Resp: &logstorepb.InitProducerResponse{ProducerId: RegisteredProducerID(id), Epoch: p.Epoch}}
	}
	if full(len(st.registered), 1, m.lim.MaxProducers) && !m.reclaimIdleProducer(ts) {
		return Result{Err: tableFull("producer", len(st.registered), m.lim.MaxProducers)}
	}
	st.lastProducerID++
	p := &logstorepb.ProducerRow{Id: st.lastProducerID, Name: r.Name, Epoch: 1, LastSeenUnixNano: ts}
	st.registered[p.Id] = p
	st.producerNames[p.Name] = p.Id
	return Result{Resp: &logstorepb.InitProducerResponse{ProducerId: RegisteredProducerID(p.Id), Epoch: p.Epoch}}
}

// reclaimIdleProducer drops the least recently seen registered row (ties:
// the smallest id) when it has been idle for longer than the idle expiry,
// and reports whether it did. The scan is linear; it runs only when the
// table is full and a new name registers.
func (m *Machine) reclaimIdleProducer(ts int64) bool {
	st := m.st
	var victim *logstorepb.ProducerRow
	for _, p := range st.registered { // order-free: the minimum is unique
		if victim == nil || cmp.Or(cmp.Compare(p.LastSeenUnixNano, victim.LastSeenUnixNano), cmp.Compare(p.Id, victim.Id)) < 0 {
			victim = p
		}
	}
	if victim == nil || victim.LastSeenUnixNano >= ts-m.lim.ProducerIdleNanos {
		return false
	}
	st.dropRegistered(victim)
	return true
}

func (s *State) dropRegistered(p *logstorepb.ProducerRow) {
	delete(s.registered, p.Id)
	delete(s.producerNames, p.Name)
}

// sweepRegistered drops registered rows not seen since cutoff.
func (s *State) sweepRegistered(cutoff int64) {
	for _, p := range s.registered { // order-free: deletes only
		if p.LastSeenUnixNano < cutoff {
			s.dropRegistered(p)
		}
	}
}

// applyRegisteredAppend applies an Append of a registered producer: id,
// epoch and sequence checks, then what applyAppend does for a legacy
// producer (room, conditions, write) and the result goes into the window.
func (m *Machine) applyRegisteredAppend(idx uint64, ts int64, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	st := m.st
	id, _ := ParseRegisteredProducerID(req.ProducerId) // validated at the edge; 0 is never held
	p := st.registered[id]
	if p == nil || req.ProducerEpoch > p.Epoch {
		return nil, apierr.Newf(logstorepb.ErrorCode_UNKNOWN_PRODUCER,
			"producer id %q epoch %d is not registered (never, or its row expired): register again with InitProducer", req.ProducerId, req.ProducerEpoch)
	}
	p.LastSeenUnixNano = ts
	if req.ProducerEpoch < p.Epoch {
		return nil, apierr.New(logstorepb.ErrorCode_PRODUCER_FENCED,
			fmt.Sprintf("producer %q (id %d) epoch %d is fenced: epoch %d registered since", p.Name, p.Id, req.ProducerEpoch, p.Epoch),
			func(d *logstorepb.ErrorDetail) { d.Epoch = p.Epoch })
	}
	expected := p.LastSequence + 1
	switch {
	case req.Sequence == expected:
	case req.Sequence > expected:
		return nil, apierr.New(logstorepb.ErrorCode_SEQUENCE_MISMATCH,
			fmt.Sprintf("producer %q (id %d): sequence %d, expected %d (a gap: an earlier sequence has not been applied)", p.Name, p.Id, req.Sequence, expected),
			func(d *logstorepb.ErrorDetail) { d.ExpectedSequence = expected })
	default:
		if r, ok := windowRetry(p, req); ok {
			return r.append()
		}
		return nil, apierr.New(logstorepb.ErrorCode_SEQUENCE_TOO_OLD,
			fmt.Sprintf("producer %q (id %d): sequence %d was applied but is older than the last %d remembered (next is %d)", p.Name, p.Id, req.Sequence, ProducerWindow, expected),
			func(d *logstorepb.ErrorDetail) { d.ExpectedSequence = expected })
	}
	if err := m.checkNew(req); err != nil {
		return nil, err // the sequence is not used up
	}
	resp, err := m.write(idx, ts, req)
	r := &logstorepb.ProducerResult{Sequence: req.Sequence, Result: resp, Digest: RequestDigest(req)}
	if err != nil {
		r.Result, r.Error, r.ErrorMessage = nil, apierr.Detail(err), statusMessage(err)
	}
	p.LastSequence = req.Sequence
	p.Results = append(p.Results, r)
	if n := len(p.Results); n > ProducerWindow {
		p.Results = append(p.Results[:0], p.Results[n-ProducerWindow:]...)
	}
	return resp, err
}

// windowRetry is the answer to req when its sequence is one p's window
// remembers (below the next one): the first result as a duplicate, the
// first refusal, or SEQUENCE_REUSED when the content differs. ok is false
// when the window does not hold the sequence.
func windowRetry(p *logstorepb.ProducerRow, req *logstorepb.AppendRequest) (Result, bool) {
	for _, r := range p.Results {
		if r.Sequence != req.Sequence {
			continue
		}
		if reusedSequence(r.Digest, req) {
			return Result{Err: sequenceReused(fmt.Sprintf("producer %q (id %d)", p.Name, p.Id), req.Sequence, p.LastSequence+1, r.Result, r.Error)}, true
		}
		resp, err := windowResult(r)
		return Result{Resp: resp, Err: err}, true
	}
	return Result{}, false
}

// Retry is the answer to req when it retries a sequence its producer's row
// remembers: what apply answers such a retry before it checks anything
// else of the request (the first result as a duplicate, the first refusal,
// or SEQUENCE_REUSED when the content differs). It reads the state only,
// so the edge answers a retry without validating it again against limits
// or schemas that changed since (issue #26): a retry of what committed is
// never an error. ok is false when req is no such retry (no producer id,
// a row the state does not hold, another epoch, a sequence not
// remembered): apply decides those.
func (s *State) Retry(req *logstorepb.AppendRequest) (Result, bool) {
	if req.ProducerId == "" || req.Sequence == 0 {
		return Result{}, false
	}
	if !registered(req) {
		p := s.producers[req.ProducerId]
		if p == nil || req.Sequence != p.LastSequence {
			return Result{}, false
		}
		return legacyRetry(p, req), true
	}
	id, ok := ParseRegisteredProducerID(req.ProducerId)
	p := s.registered[id]
	if !ok || p == nil || p.Epoch != req.ProducerEpoch || req.Sequence > p.LastSequence {
		return Result{}, false
	}
	return windowRetry(p, req)
}

// append splits r into an Append's response and error.
func (r Result) append() (*logstorepb.AppendResponse, error) {
	resp, _ := r.Resp.(*logstorepb.AppendResponse)
	return resp, r.Err
}

// sequenceReused is the refusal of a retry of a remembered sequence with
// other content (producer names the producer; result or failure is what
// the sequence's first request got). Nothing is written.
func sequenceReused(producer string, seq, expected uint64, result *logstorepb.AppendResponse, failure *logstorepb.ErrorDetail) error {
	first := fmt.Sprintf("committed at lsn %d", result.GetLsn())
	if failure != nil {
		first = "refused with " + failure.Code.String()
	}
	return apierr.New(logstorepb.ErrorCode_SEQUENCE_REUSED,
		fmt.Sprintf("%s: sequence %d was already used for a request with other content (%s; next sequence is %d): a producer must resend a sequence only with the same content", producer, seq, first, expected),
		func(d *logstorepb.ErrorDetail) { d.ExpectedSequence = expected })
}

// windowResult answers a retry of a remembered sequence with its result.
func windowResult(r *logstorepb.ProducerResult) (*logstorepb.AppendResponse, error) {
	if r.Error != nil {
		d := proto.Clone(r.Error).(*logstorepb.ErrorDetail)
		return nil, apierr.New(d.Code, r.ErrorMessage, func(out *logstorepb.ErrorDetail) { proto.Merge(out, d) })
	}
	resp := proto.Clone(r.Result).(*logstorepb.AppendResponse)
	resp.Duplicate = true
	return resp, nil
}

// registeredToProto returns the registered rows sorted by id (cloned: the
// snapshot is persisted while apply goes on).
func (s *State) registeredToProto() []*logstorepb.ProducerRow {
	out := make([]*logstorepb.ProducerRow, 0, len(s.registered))
	for _, id := range sortedKeys(s.registered) {
		out = append(out, proto.Clone(s.registered[id]).(*logstorepb.ProducerRow))
	}
	return out
}

// registeredFromProto loads the registered rows of a snapshot, checking
// the table's invariants (unique ids and names, ids not above the
// counter, a window of ascending sequences ending at the last one, one
// outcome each).
func (s *State) registeredFromProto(p *logstorepb.FSMState) error {
	s.lastProducerID = p.LastProducerId
	for _, r := range p.RegisteredProducers {
		if r.Id == 0 || r.Id > s.lastProducerID || r.Name == "" || r.Epoch == 0 || s.registered[r.Id] != nil {
			return fmt.Errorf("%w: registered producer row %d %q: bad id, name or epoch (last id %d)", ErrCorruptState, r.Id, r.Name, s.lastProducerID)
		}
		if _, dup := s.producerNames[r.Name]; dup {
			return fmt.Errorf("%w: registered producer name %q twice", ErrCorruptState, r.Name)
		}
		if len(r.Results) > ProducerWindow {
			return fmt.Errorf("%w: registered producer %d: %d results, window %d", ErrCorruptState, r.Id, len(r.Results), ProducerWindow)
		}
		for i, res := range r.Results {
			want := r.LastSequence - uint64(len(r.Results)-1-i)
			if res.Sequence != want || (res.Result == nil) == (res.Error == nil) || !validDigest(res.Digest) {
				return fmt.Errorf("%w: registered producer %d result %d: sequence %d (want %d), not exactly one outcome, or a digest of %d bytes", ErrCorruptState, r.Id, i, res.Sequence, want, len(res.Digest))
			}
		}
		s.registered[r.Id] = r
		s.producerNames[r.Name] = r.Id
	}
	return nil
}
