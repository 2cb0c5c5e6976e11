package api

import (
	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/fsm"
)

// topicKnown reports whether topic exists in st: it was written at least
// once (retention removing its messages does not make it unknown), or it
// is declared by its own name (CreateTopic --topic; a pattern does not make
// every matching name known, so a typo under shard-* still fails).
func topicKnown(st *fsm.State, topic string) bool {
	return st.NextOffset(topic) > 0 || st.Declared(topic)
}

// unknownTopic is the NOT_FOUND UNKNOWN_TOPIC answer to a read of a topic
// this node does not know. The answer is this node's: a follower that has
// not applied a topic's first write yet gives it too, so clients
// (internal/storeconn) ask the leader before taking it as final.
func unknownTopic(topic string) error { return apierr.UnknownTopic(topic) }
