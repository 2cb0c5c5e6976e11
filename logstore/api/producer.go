package api

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// InitProducer registers req.Name as a producer (a Raft command, cluster
// version 3; see fsm/producer.go): a new name gets a new id at epoch 1, a
// known one its id with the next epoch. TABLE_FULL when the producer table
// is full of recently active producers; FEATURE_NOT_ENABLED before every
// voter supports version 3.
func (s *server) InitProducer(ctx context.Context, req *logstorepb.InitProducerRequest) (*logstorepb.InitProducerResponse, error) {
	if err := ValidName("name", req.Name); err != nil {
		return nil, err
	}
	resp, err := submitAs[*logstorepb.InitProducerResponse](ctx, s, &logstorepb.Command{Kind: &logstorepb.Command_InitProducer{InitProducer: req}}, proto.Size(req))
	if apierr.CodeOf(err) == logstorepb.ErrorCode_TABLE_FULL { // the producer table (InitProducer writes no other)
		s.metrics.producerRefusals.WithLabelValues(producerRefusalLabel(logstorepb.ErrorCode_TABLE_FULL)).Inc()
	}
	return resp, err
}

// producerRefusalCodes are the codes logstore_producer_refusals_total
// counts: TABLE_FULL only from InitProducer (an Append's TABLE_FULL is
// about the topic or group offset table), the others from Appends.
var producerRefusalCodes = []logstorepb.ErrorCode{
	logstorepb.ErrorCode_UNKNOWN_PRODUCER, logstorepb.ErrorCode_PRODUCER_FENCED, logstorepb.ErrorCode_TABLE_FULL,
	logstorepb.ErrorCode_SEQUENCE_TOO_OLD, logstorepb.ErrorCode_SEQUENCE_REUSED, logstorepb.ErrorCode_LEGACY_PRODUCER_REFUSED,
}

// producerRefusalLabel is a code's label value: its name in lower case.
func producerRefusalLabel(c logstorepb.ErrorCode) string { return strings.ToLower(c.String()) }

// countProducerRefusal counts err in logstore_producer_refusals_total
// when it is a producer refusal of an Append (the leader's answer).
func (m *Metrics) countProducerRefusal(err error) {
	if err == nil {
		return
	}
	if c := apierr.CodeOf(err); c != logstorepb.ErrorCode_TABLE_FULL && slices.Contains(producerRefusalCodes, c) {
		m.producerRefusals.WithLabelValues(producerRefusalLabel(c)).Inc()
	}
}
