package target

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// runApplier is the applier goroutine: the only caller of the Store and the
// owner of s.ap. It takes the next item; a Hello is handled alone; batches
// are grouped with everything else already queued (what arrived while the
// previous Apply ran), up to the group bounds, and applied in one Apply.
func (s *Server) runApplier() {
	defer close(s.applierDone)
	var pending *item // a barrier item taken from the queue while grouping
	for {
		select {
		case <-s.quit: // Close: stop after the Apply that just ran
			return
		default:
		}
		it := pending
		pending = nil
		if it == nil {
			select {
			case it = <-s.queue:
				s.dequeued(it)
			case <-s.quit:
				return
			}
		}
		if it.hello != nil || it.eof || it.run != nil {
			s.control(it)
			continue
		}
		group := []*item{it}
		n, size := len(it.batch.Deliveries), it.size
	drain:
		for n < s.cfg.MaxGroupDeliveries && size < s.cfg.MaxGroupBytes {
			select {
			case next := <-s.queue:
				s.dequeued(next)
				if next.hello != nil || next.eof || next.run != nil {
					pending = next
					break drain
				}
				group = append(group, next)
				n += len(next.batch.Deliveries)
				size += next.size
			default:
				break drain
			}
		}
		s.m.queueBatches.Set(float64(len(s.queue)))
		s.applyGroup(group)
	}
}

// dequeued releases the queue bytes of an item the applier took.
func (s *Server) dequeued(it *item) { s.queued.release(it.size) }

// control handles a Hello, the end of a stream's requests, or a function
// that runs alone (a Restore).
func (s *Server) control(it *item) {
	if it.run != nil {
		it.run()
		return
	}
	if it.eof {
		if it.st == s.ap.active {
			it.st.end(nil) // the LogPlayer closed its side; everything queued before is applied
		}
		return
	}
	ack, r := s.accept(it.st, it.hello)
	it.reply <- helloResult{ack: ack, err: r}
}

// accept runs the epoch fencing of a Hello and makes its stream the active
// one. A higher epoch is stored before the HelloAck, so fencing survives a
// restart.
func (s *Server) accept(st *stream, h *targetpb.Hello) (*targetpb.HelloAck, *refusal) {
	if r := s.loadState(); r != nil {
		return nil, r
	}
	cur := s.ap.st
	epoch, session := types.Epoch(h.Epoch), types.Session(h.Session)
	if epoch < cur.Epoch {
		return nil, refuse(reasonStaleEpoch, logstorepb.ErrorCode_STALE_EPOCH,
			&logstorepb.ErrorDetail{Epoch: uint64(cur.Epoch)},
			"epoch %d is below the highest epoch seen %d: a newer LogPlayer owns this target", epoch, cur.Epoch)
	}
	if epoch == cur.Epoch && session < s.ap.session {
		return nil, refuse(reasonSuperseded, logstorepb.ErrorCode_SUPERSEDED,
			&logstorepb.ErrorDetail{Epoch: uint64(cur.Epoch)},
			"session %d is below session %d already seen in epoch %d", session, s.ap.session, epoch)
	}
	adopt, r := s.checkLog(cur, h)
	if r != nil {
		return nil, r
	}
	if epoch > cur.Epoch || adopt {
		next := cur.Clone()
		next.Epoch = max(epoch, cur.Epoch)
		if adopt {
			next.LogClusterID, next.LogIncarnation = h.LogClusterId, h.LogIncarnation
		}
		if err := s.cfg.Store.Apply(nil, next); err != nil {
			s.ap.stale = true
			return nil, s.storeFailure(err)
		}
		s.setState(next)
		if epoch > cur.Epoch {
			s.log.Info("epoch advanced", "epoch", h.Epoch, "player", h.PlayerId)
		}
	}
	s.ap.session = session
	if old := s.ap.active; old != nil && old != st && !old.isEnded() {
		var r *refusal
		if old.hello.Epoch < h.Epoch {
			r = refuse(reasonStaleEpoch, logstorepb.ErrorCode_STALE_EPOCH, &logstorepb.ErrorDetail{Epoch: h.Epoch},
				"epoch %d took over from epoch %d", h.Epoch, old.hello.Epoch)
		} else {
			r = refuse(reasonSuperseded, logstorepb.ErrorCode_SUPERSEDED, &logstorepb.ErrorDetail{Epoch: h.Epoch},
				"a newer stream (epoch %d session %d) took over", h.Epoch, h.Session)
		}
		s.countRefusal(old, r)
		old.end(r.status())
	}
	s.ap.active = st
	return s.helloAck(), nil
}

// checkLog compares the Hello's log identity with the State's. It reports
// whether the State must adopt the Hello's (none stored yet, or the
// operator's Config.AdoptLogIdentity), or refuses a Hello from another log
// (OTHER_LOG). A Hello without an identity (an older LogPlayer or LogStore)
// is not checked.
func (s *Server) checkLog(cur State, h *targetpb.Hello) (bool, *refusal) {
	if h.LogClusterId == "" && h.LogIncarnation == "" {
		return false, nil
	}
	if cur.LogClusterID == h.LogClusterId && cur.LogIncarnation == h.LogIncarnation {
		return false, nil
	}
	stored := cur.LogClusterID + "/" + cur.LogIncarnation
	switch {
	case cur.LogClusterID == "" && cur.LogIncarnation == "":
		s.log.Info("log identity adopted", "log", h.LogClusterId+"/"+h.LogIncarnation, "lsn", cur.AppliedLSN)
		return true, nil
	case s.cfg.AdoptLogIdentity:
		s.log.Warn("operator reset (AdoptLogIdentity): the State now follows another log",
			"was", stored, "log", h.LogClusterId+"/"+h.LogIncarnation, "lsn", cur.AppliedLSN)
		return true, nil
	}
	return false, refuse(reasonOtherLog, logstorepb.ErrorCode_OTHER_LOG,
		&logstorepb.ErrorDetail{LogIdentity: stored, AppliedLsn: uint64(cur.AppliedLSN)},
		"this target's State (applied lsn %d) was written from log %s, the LogPlayer delivers from log %s/%s "+
			"(the LogStore was restored or recovered, or this is another cluster): re-seed the target, or, when its "+
			"data matches the new log, restart it with Config.AdoptLogIdentity (see the README)",
		cur.AppliedLSN, stored, h.LogClusterId, h.LogIncarnation)
}

func (s *Server) helloAck() *targetpb.HelloAck {
	ack := &targetpb.HelloAck{
		AppliedLsn:      uint64(s.ap.st.AppliedLSN),
		IncarnationId:   s.cfg.IncarnationID,
		ProtocolVersion: targetpb.ProtocolVersion_PROTOCOL_VERSION_1,
		LogClusterId:    s.ap.st.LogClusterID,
		LogIncarnation:  s.ap.st.LogIncarnation,
	}
	for topic, next := range s.ap.st.Topics {
		ack.Topics = append(ack.Topics, &targetpb.TopicOffset{Topic: topic, NextOffset: uint64(next)})
	}
	slices.SortFunc(ack.Topics, func(a, b *targetpb.TopicOffset) int { return strings.Compare(a.Topic, b.Topic) })
	return ack
}

// applyGroup checks the continuity of the group's batches and applies those
// that pass in one Store.Apply. A batch that fails a check ends its stream;
// what came before it in the group is still applied and acked.
func (s *Server) applyGroup(group []*item) {
	active := s.ap.active
	if active == nil || active.isEnded() {
		return // every item belongs to a stream that already ended
	}
	if r := s.loadState(); r != nil {
		s.countRefusal(active, r)
		active.end(r.status())
		return
	}
	next := s.ap.st.Clone()
	var ok []checkedBatch // the batches that passed, in order
	var refused *refusal
	dispatched := int64(0)
	for _, it := range group {
		if it.st != active {
			continue // queued by a stream that was overtaken
		}
		out, r := s.check.advance(&next, it.batch.Deliveries)
		if r != nil {
			refused = r
			break
		}
		ok = append(ok, checkedBatch{in: it.batch.Deliveries, out: out})
		if d := it.batch.DispatchedUnixNano; d != 0 && (dispatched == 0 || d < dispatched) {
			dispatched = d
		}
	}
	if len(ok) > 0 {
		switch err := s.apply(ok, next); {
		case err == nil:
			if dispatched != 0 {
				s.m.deliveryDelay.Observe(s.cfg.Now().Sub(time.Unix(0, dispatched)).Seconds())
			}
			active.ack(next.AppliedLSN)
		case errors.Is(err, ErrPermanent):
			refused = s.applyBeforePermanent(ok, err)
		default:
			s.ap.stale = true
			refused = s.storeFailure(err)
		}
	}
	if refused != nil {
		s.countRefusal(active, refused)
		active.end(refused.status())
	}
}

// checkedBatch is one batch that passed continuity: in is what the stream
// sent, out what the Store applies (in with the operator's skipped LSNs
// turned into progress markers). Continuity is re-checked over in, never
// over out: a marker carries no slices, so checking it would not advance the
// skipped delivery's topics.
type checkedBatch struct {
	in, out []*targetpb.Delivery
}

// apply calls Store.Apply with the concatenated batches and, on success,
// installs next.
func (s *Server) apply(batches []checkedBatch, next State) error {
	var ds []*targetpb.Delivery
	if len(batches) == 1 {
		ds = batches[0].out
	} else {
		for _, b := range batches {
			ds = append(ds, b.out...)
		}
	}
	if len(ds) == 0 {
		return nil // only empty batches: nothing to store, ack the current LSN
	}
	start := s.cfg.Now()
	err := s.cfg.Store.Apply(ds, next)
	s.m.applyDuration.Observe(s.cfg.Now().Sub(start).Seconds())
	if err != nil {
		return err
	}
	s.m.applyDeliveries.Observe(float64(len(ds)))
	s.m.applyBatches.Observe(float64(len(batches)))
	s.setState(next)
	return nil
}

// applyBeforePermanent handles a permanent Apply failure: nothing was
// applied. The batches wholly before the failing LSN are checked again from
// the applied State (over what the stream sent, so skipped LSNs still move
// their topics) and applied on their own, and the stream is refused with
// APPLY_REJECTED naming the LSN.
func (s *Server) applyBeforePermanent(batches []checkedBatch, err error) *refusal {
	var lsn types.LSN
	var ae *ApplyError
	if errors.As(err, &ae) {
		lsn = ae.LSN
	}
	next := s.ap.st.Clone()
	var before []checkedBatch
	for _, b := range batches {
		if len(b.in) == 0 || types.LSN(b.in[len(b.in)-1].Lsn) >= lsn {
			break
		}
		out, r := s.check.advance(&next, b.in)
		if r != nil {
			panic("target: batch passed continuity once and failed it on retry: " + r.msg)
		}
		before = append(before, checkedBatch{in: b.in, out: out})
	}
	if len(before) > 0 {
		if err2 := s.apply(before, next); err2 != nil {
			if !errors.Is(err2, ErrPermanent) {
				s.ap.stale = true
				return s.storeFailure(err2)
			}
			s.log.Error("store reported a permanent error again before the failing LSN", "lsn", lsn, "err", err2)
		} else {
			s.ap.active.ack(next.AppliedLSN)
		}
	}
	return refuse(reasonPermanent, logstorepb.ErrorCode_APPLY_REJECTED, &logstorepb.ErrorDetail{Lsn: uint64(lsn)},
		"lsn %d cannot be applied (%v); nothing of its batch was applied. Permanent: the LogPlayer must stop "+
			"delivering to this target; an operator fixes the target or skips the LSN (target.Config.SkipLSNs)",
		lsn, err)
}

// loadState reloads the State after a transient Store failure.
func (s *Server) loadState() *refusal {
	if !s.ap.stale {
		return nil
	}
	st, err := s.cfg.Store.State()
	if err != nil {
		return s.storeFailure(err)
	}
	s.ap.stale = false
	s.setState(st.Clone())
	return nil
}

// storeFailure is the refusal of a failed Store call: STALE_EPOCH when the
// Store says a newer LogPlayer owns the target (ErrStaleEpoch), so the
// LogPlayer stops on the stream where it happens; INTERNAL otherwise.
func (s *Server) storeFailure(err error) *refusal {
	var se *StaleEpochError
	if errors.As(err, &se) {
		return refuse(reasonStaleEpoch, logstorepb.ErrorCode_STALE_EPOCH,
			&logstorepb.ErrorDetail{Epoch: uint64(se.Epoch)},
			"the store refused the batch, nothing of it applied: %v", err)
	}
	return refuse(reasonStore, logstorepb.ErrorCode_INTERNAL, nil, "store failure: %v; reconnect with backoff", err)
}
