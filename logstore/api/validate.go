package api

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Limits checked at the gRPC edge; a request that fails them writes nothing.
const (
	// MaxTopicLen is the longest topic name (Kafka's limit).
	MaxTopicLen = types.MaxTopicLen
	// MaxNameLen bounds producer ids, group and consumer names.
	MaxNameLen = 256
)

// ValidTopic reports whether t is a topic name: 1..249 characters of
// [a-zA-Z0-9._-] (types.ValidTopic, the one definition of the rule).
func ValidTopic(t string) bool { return types.ValidTopic(t) }

// InvalidTopic is the INVALID_TOPIC refusal of topic name t.
func InvalidTopic(t string) error {
	return apierr.New(logstorepb.ErrorCode_INVALID_TOPIC,
		fmt.Sprintf("invalid topic %q: want 1..%d characters of [a-zA-Z0-9._-]", t, MaxTopicLen),
		func(d *logstorepb.ErrorDetail) { d.Topic = t })
}

// InvalidArg is an INVALID_ARGUMENT refusal.
func InvalidArg(format string, args ...any) error {
	return apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, format, args...)
}

// ValidName refuses (INVALID_ARGUMENT) a name of kind that is empty or
// longer than MaxNameLen.
func ValidName(kind, s string) error {
	if s == "" || len(s) > MaxNameLen {
		return InvalidArg("%s must be 1..%d bytes, got %d", kind, MaxNameLen, len(s))
	}
	return nil
}

// messageBytes is what a message counts against MaxMessageBytes.
func messageBytes(m *logstorepb.Message) int {
	n := len(m.Value) + len(m.Key)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// validateAppend checks an AppendRequest against the documented rules and
// returns its encoded size.
func validateAppend(req *logstorepb.AppendRequest, maxMessage, maxRequest int) (int, error) {
	size := proto.Size(req)
	if size > maxRequest {
		return 0, apierr.New(logstorepb.ErrorCode_REQUEST_TOO_LARGE,
			fmt.Sprintf("request is %d bytes, limit %d", size, maxRequest),
			func(d *logstorepb.ErrorDetail) { d.Limit = uint64(maxRequest) })
	}
	if len(req.Slices) == 0 && len(req.OffsetCommits) == 0 {
		return 0, apierr.Newf(logstorepb.ErrorCode_EMPTY_TRANSACTION, "transaction has no slices and no offset commits")
	}
	topics := make(map[string]bool, len(req.Slices))
	for _, s := range req.Slices {
		if !ValidTopic(s.Topic) {
			return 0, InvalidTopic(s.Topic)
		}
		if topics[s.Topic] {
			return 0, apierr.New(logstorepb.ErrorCode_DUPLICATE_TOPIC, fmt.Sprintf("topic %q appears twice", s.Topic),
				func(d *logstorepb.ErrorDetail) { d.Topic = s.Topic })
		}
		topics[s.Topic] = true
		if len(s.Messages) == 0 {
			return 0, apierr.New(logstorepb.ErrorCode_EMPTY_TRANSACTION, fmt.Sprintf("slice of topic %q has no messages", s.Topic),
				func(d *logstorepb.ErrorDetail) { d.Topic = s.Topic })
		}
		for i, m := range s.Messages {
			if m == nil {
				return 0, InvalidArg("topic %q message %d is null", s.Topic, i)
			}
			if n := messageBytes(m); n > maxMessage {
				return 0, apierr.New(logstorepb.ErrorCode_MESSAGE_TOO_LARGE,
					fmt.Sprintf("topic %q message %d is %d bytes, limit %d", s.Topic, i, n, maxMessage),
					func(d *logstorepb.ErrorDetail) { d.Topic, d.Limit = s.Topic, uint64(maxMessage) })
			}
		}
	}
	if req.ProducerEpoch != 0 {
		if err := validateRegisteredProducer(req); err != nil {
			return 0, err
		}
	} else if req.ProducerId != "" {
		if err := ValidName("producer_id", req.ProducerId); err != nil {
			return 0, err
		}
		if req.Sequence == 0 {
			return 0, InvalidArg("producer %q: sequence must be >= 1", req.ProducerId)
		}
	} else if req.Sequence != 0 {
		return 0, InvalidArg("sequence %d without producer_id", req.Sequence)
	}
	// groupKey names one consumer group's position in one topic.
	type groupKey struct{ group, topic string }
	conds := map[groupKey]bool{} // group "" is the topic's own next offset
	for _, c := range req.Conditions {
		if !ValidTopic(c.Topic) {
			return 0, InvalidTopic(c.Topic)
		}
		if len(c.Group) > MaxNameLen {
			return 0, InvalidArg("condition group must be at most %d bytes, got %d", MaxNameLen, len(c.Group))
		}
		k := groupKey{c.Group, c.Topic}
		if conds[k] {
			return 0, apierr.New(logstorepb.ErrorCode_DUPLICATE_TOPIC, fmt.Sprintf("condition on topic %q (group %q) appears twice", c.Topic, c.Group),
				func(d *logstorepb.ErrorDetail) { d.Topic = c.Topic })
		}
		conds[k] = true
	}
	commits := map[groupKey]bool{}
	for _, oc := range req.OffsetCommits {
		if err := ValidName("offset commit group", oc.Group); err != nil {
			return 0, err
		}
		if !ValidTopic(oc.Topic) {
			return 0, InvalidTopic(oc.Topic)
		}
		k := groupKey{oc.Group, oc.Topic}
		if commits[k] {
			return 0, InvalidArg("offset commit for group %q topic %q appears twice", oc.Group, oc.Topic)
		}
		commits[k] = true
	}
	return size, nil
}

// ValidateTopics refuses the first invalid topic name of topics.
func ValidateTopics(topics []string) error {
	for _, t := range topics {
		if !ValidTopic(t) {
			return InvalidTopic(t)
		}
	}
	return nil
}

// validateRegisteredProducer checks the registered-producer fields of an
// Append (producer_epoch set): producer_id is a registered id in its
// canonical decimal form, and the sequence is >= 1.
func validateRegisteredProducer(req *logstorepb.AppendRequest) error {
	if _, ok := fsm.ParseRegisteredProducerID(req.ProducerId); !ok {
		return InvalidArg("producer_epoch %d: producer_id %q is not a registered id (the decimal id InitProducer returned)", req.ProducerEpoch, req.ProducerId)
	}
	if req.Sequence == 0 {
		return InvalidArg("producer %s: sequence must be >= 1", req.ProducerId)
	}
	return nil
}

// MaxAppendBatchRequests bounds the requests of one AppendBatch call.
const MaxAppendBatchRequests = 1024

// AppendBatchRequestFactor is how many MaxRequestBytes one AppendBatch call
// may carry in all (each request stays within MaxRequestBytes).
const AppendBatchRequestFactor = 4

// ValidateBatch refuses, as a whole, an AppendBatch of no request or more
// than MaxAppendBatchRequests (INVALID_ARGUMENT, limit), or above limit
// bytes (REQUEST_TOO_LARGE with the batch limit).
func ValidateBatch(req *logstorepb.AppendBatchRequest, limit int) error {
	if n := len(req.Requests); n == 0 || n > MaxAppendBatchRequests {
		return apierr.New(logstorepb.ErrorCode_INVALID_ARGUMENT,
			fmt.Sprintf("an AppendBatch holds 1 to %d requests, not %d", MaxAppendBatchRequests, n),
			func(d *logstorepb.ErrorDetail) { d.Limit = MaxAppendBatchRequests })
	}
	if size := proto.Size(req); size > limit {
		return apierr.New(logstorepb.ErrorCode_REQUEST_TOO_LARGE,
			fmt.Sprintf("AppendBatch is %d bytes, limit %d (%d x the request limit); send fewer requests per call", size, limit, AppendBatchRequestFactor),
			func(d *logstorepb.ErrorDetail) { d.Limit = uint64(limit) })
	}
	return nil
}
