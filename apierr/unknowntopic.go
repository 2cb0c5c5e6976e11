package apierr

import (
	"fmt"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// UnknownTopic is the NOT_FOUND UNKNOWN_TOPIC error for a read of a topic
// that was never written; the detail names the topic.
func UnknownTopic(topic string) error {
	return New(logstorepb.ErrorCode_UNKNOWN_TOPIC,
		fmt.Sprintf("topic %q does not exist (nothing was ever written to it)", topic),
		func(d *logstorepb.ErrorDetail) { d.Topic = topic })
}
