package logstore

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// InitProducer registers req.Name as a producer (a Raft command, cluster
// version 3; see fsm/producer.go): a new name gets a new id at epoch 1, a
// known one its id with the next epoch. TABLE_FULL when the producer table
// is full of recently active producers; FEATURE_NOT_ENABLED before every
// voter supports version 3.
func (s *server) InitProducer(ctx context.Context, req *logstorepb.InitProducerRequest) (*logstorepb.InitProducerResponse, error) {
	if err := validName("name", req.Name); err != nil {
		return nil, err
	}
	resp, err := s.submit(ctx, &logstorepb.Command{Kind: &logstorepb.Command_InitProducer{InitProducer: req}}, proto.Size(req))
	if err != nil {
		return nil, err
	}
	return resp.(*logstorepb.InitProducerResponse), nil
}

// validateRegisteredProducer checks the registered-producer fields of an
// Append (producer_epoch set): producer_id is a registered id in its
// canonical decimal form, and the sequence is >= 1.
func validateRegisteredProducer(req *logstorepb.AppendRequest) error {
	if _, ok := fsm.ParseRegisteredProducerID(req.ProducerId); !ok {
		return invalidArg("producer_epoch %d: producer_id %q is not a registered id (the decimal id InitProducer returned)", req.ProducerEpoch, req.ProducerId)
	}
	if req.Sequence == 0 {
		return invalidArg("producer %s: sequence must be >= 1", req.ProducerId)
	}
	return nil
}
