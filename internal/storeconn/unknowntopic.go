package storeconn

import (
	"context"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// unknownTopic handles a node's UNKNOWN_TOPIC. The answer is the node's
// own: a follower that has not applied a topic's first write yet gives it
// too. It is final when the node that gave it leads (the leader applied
// every acknowledged write before answering it) or when every node gave it;
// otherwise the stream asks the leader next (or, with none known, the
// next node that has not answered it). A node that is down is not waited
// for once the leader answered.
func (s *Stream[R]) unknownTopic(ctx context.Context) (final bool) {
	if s.below == nil {
		s.below = map[int]bool{}
	}
	s.below[s.node] = true
	if len(s.below) >= s.c.Len() {
		return true
	}
	s.c.ProbeLeader(ctx)
	if l := s.c.Leader(); l == s.node {
		return true
	} else if l >= 0 && !s.below[l] {
		s.preferLeader = true
	}
	s.c.Failed(s.node)
	return false
}

// isUnknownTopic reports whether err is a node's UNKNOWN_TOPIC.
func isUnknownTopic(err error) bool {
	return apierr.CodeOf(err) == logstorepb.ErrorCode_UNKNOWN_TOPIC
}

// Sleep waits d, or returns ctx's error when it ends first.
func Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }
