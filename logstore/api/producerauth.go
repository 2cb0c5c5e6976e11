package api

import (
	"context"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/security"
)

// authorizeProducers refuses an Append, or a batch holding one, whose
// producer the caller may not use (security.Grant.Producers): a legacy
// producer_id is its own name, a registered id's name is in the producer
// table. The refusal is PERMISSION_DENIED and names nothing of the
// producer's state (epoch, sequence). The security interceptor cannot do
// it: the id's name is replicated state.
//
// An id is never handed out twice and a row's name never changes, so any
// node's table answers for an id it holds. An id this node does not hold
// was never registered, expired, or (on a leader that has not applied its
// whole log yet) is not applied here: the leader answers UNKNOWN_PRODUCER,
// as its FSM would (the SDK registers again), a follower NOT_LEADER; never
// is it let through unchecked. A caller that may use every name
// (security off included) skips all of this.
func (s *server) authorizeProducers(ctx context.Context, reqs ...*logstorepb.AppendRequest) error {
	acc := security.AccessFrom(ctx)
	if acc.MayUseEveryProducer() {
		return nil
	}
	for _, r := range reqs {
		if r.ProducerId == "" {
			continue
		}
		name := r.ProducerId
		if r.ProducerEpoch != 0 {
			id, ok := fsm.ParseRegisteredProducerID(r.ProducerId)
			if !ok {
				continue // validateRegisteredProducer refuses it
			}
			var known bool
			s.node.View(func(st *fsm.State) { name, known = st.ProducerName(id) })
			if !known {
				if !s.isLeader() {
					return s.notLeader()
				}
				return apierr.Newf(logstorepb.ErrorCode_UNKNOWN_PRODUCER,
					"producer id %q epoch %d is not registered (never, or its row expired): register again with InitProducer", r.ProducerId, r.ProducerEpoch)
			}
		}
		if !acc.MayUseProducer(name) {
			return apierr.Newf(logstorepb.ErrorCode_PERMISSION_DENIED,
				"%s: %s refused: producer id %q: no grant binds its producer name to this identity", logstorepb.ErrorCode_PERMISSION_DENIED, acc.Identity, r.ProducerId)
		}
	}
	return nil
}
