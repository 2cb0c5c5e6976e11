package target

import (
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// checker holds the continuity rules of one Server. It is pure: no I/O, no
// goroutines, so tests call it directly.
type checker struct {
	// topics, when not nil, is the only set of topics accepted; each starts
	// at offset 0. When nil any topic is accepted and the first slice of a
	// topic never seen fixes its position.
	topics map[string]bool
	// skip lists LSNs whose data the operator chose to drop (Config.SkipLSNs).
	skip map[types.LSN]bool
}

// advance checks the deliveries of one batch against st. When they all pass
// it moves st past them and returns what the Store must apply (skipped LSNs
// turned into progress markers); on a refusal st is unchanged.
func (c *checker) advance(st *State, ds []*targetpb.Delivery) ([]*targetpb.Delivery, *refusal) {
	applied := st.AppliedLSN
	var moved map[string]types.Offset // topic positions this batch changes
	next := func(topic string) (types.Offset, bool) {
		if o, ok := moved[topic]; ok {
			return o, true
		}
		if o, ok := st.Topics[topic]; ok {
			return o, true
		}
		if c.topics != nil {
			return 0, true
		}
		return 0, false
	}
	out, copied := ds, false
	for i, d := range ds {
		if d.GetLsn() == 0 {
			return nil, refuse(reasonProtocol, logstorepb.ErrorCode_INVALID_ARGUMENT, nil,
				"delivery with lsn 0")
		}
		lsn := types.LSN(d.Lsn)
		if lsn <= applied {
			reason, word := reasonBackwardsLSN, "backwards"
			if lsn == applied {
				reason, word = reasonDuplicateLSN, "duplicate"
			}
			return nil, refuse(reason, logstorepb.ErrorCode_CONTINUITY,
				&logstorepb.ErrorDetail{Lsn: d.Lsn, AppliedLsn: uint64(st.AppliedLSN)},
				"%s lsn %d: not above %d (applied lsn %d); reconnect and resync", word, lsn, applied, st.AppliedLSN)
		}
		for j, sl := range d.Slices {
			if r := c.checkSlice(d, j, sl); r != nil {
				return nil, r
			}
			want, known := next(sl.Topic)
			first := types.Offset(sl.FirstOffset)
			if known && first != want {
				reason, word := reasonOffsetGap, "gap"
				if first < want {
					reason, word = reasonOffsetOverlap, "overlap"
				}
				return nil, refuse(reason, logstorepb.ErrorCode_CONTINUITY,
					&logstorepb.ErrorDetail{Lsn: d.Lsn, AppliedLsn: uint64(st.AppliedLSN), Topic: sl.Topic, ActualNextOffset: uint64(want)},
					"offset %s at lsn %d: topic %q slice starts at offset %d, expected %d; reconnect and resync",
					word, d.Lsn, sl.Topic, sl.FirstOffset, want)
			}
			if moved == nil {
				moved = map[string]types.Offset{}
			}
			moved[sl.Topic] = first + types.Offset(len(sl.Messages))
		}
		if c.skip[lsn] && len(d.Slices) > 0 {
			if !copied {
				out, copied = append([]*targetpb.Delivery(nil), ds...), true
			}
			out[i] = &targetpb.Delivery{Lsn: d.Lsn, TimestampUnixNano: d.TimestampUnixNano}
		}
		applied = lsn
	}
	st.AppliedLSN = applied
	for topic, o := range moved {
		if st.Topics == nil {
			st.Topics = map[string]types.Offset{}
		}
		st.Topics[topic] = o
	}
	return out, nil
}

// checkSlice checks the shape of slice j of d.
func (c *checker) checkSlice(d *targetpb.Delivery, j int, sl *logstorepb.TxnSlice) *refusal {
	if sl.GetTopic() == "" || len(sl.Messages) == 0 {
		return refuse(reasonProtocol, logstorepb.ErrorCode_INVALID_ARGUMENT,
			&logstorepb.ErrorDetail{Lsn: d.Lsn}, "lsn %d: slice %d has no topic or no messages", d.Lsn, j)
	}
	for _, prev := range d.Slices[:j] {
		if prev.Topic == sl.Topic {
			return refuse(reasonProtocol, logstorepb.ErrorCode_INVALID_ARGUMENT,
				&logstorepb.ErrorDetail{Lsn: d.Lsn, Topic: sl.Topic}, "lsn %d: topic %q appears twice", d.Lsn, sl.Topic)
		}
	}
	if c.topics != nil && !c.topics[sl.Topic] {
		return refuse(reasonUnknownTopic, logstorepb.ErrorCode_APPLY_REJECTED,
			&logstorepb.ErrorDetail{Lsn: d.Lsn, Topic: sl.Topic},
			"lsn %d: topic %q is not served by this target (permanent: fix the LogPlayer's subscriptions)", d.Lsn, sl.Topic)
	}
	return nil
}
