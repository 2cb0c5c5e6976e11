package api

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Bounds of the topic listings: what one Status, or one ListTopics page,
// copies under the FSM lock and looks up in the segment index.
const (
	// StatusTopicsMax is how many topics Status lists (the smallest names);
	// StatusResponse.topic_count says how many there are.
	StatusTopicsMax = 100
	// ListTopicsDefault and ListTopicsMax are a ListTopics page's default
	// and largest size.
	ListTopicsDefault = 100
	ListTopicsMax     = 1000
)

func (s *server) CreateTopic(ctx context.Context, req *logstorepb.CreateTopicRequest) (*logstorepb.CreateTopicResponse, error) {
	if err := fsm.ValidateDeclaration(req.GetDeclaration()); err != nil {
		return nil, err
	}
	return submitAs[*logstorepb.CreateTopicResponse](ctx, s, &logstorepb.Command{Kind: &logstorepb.Command_CreateTopic{CreateTopic: req}}, proto.Size(req))
}

func (s *server) DescribeTopic(_ context.Context, req *logstorepb.DescribeTopicRequest) (*logstorepb.DescribeTopicResponse, error) {
	if !ValidTopic(req.Topic) {
		return nil, InvalidTopic(req.Topic)
	}
	if req.Leader {
		if err := s.leaderOnly(); err != nil {
			return nil, err
		}
	}
	var info *logstorepb.TopicInfo
	s.node.View(func(st *fsm.State) { info = topicInfo(st, req.Topic) })
	if info.NextOffset == 0 && info.DeclaredBy == "" {
		return nil, apierr.New(logstorepb.ErrorCode_UNKNOWN_TOPIC,
			fmt.Sprintf("topic %q was never written and is not declared", req.Topic),
			func(d *logstorepb.ErrorDetail) { d.Topic = req.Topic })
	}
	s.firstOffsets([]*logstorepb.TopicInfo{info})
	return &logstorepb.DescribeTopicResponse{Topic: info}, nil
}

func (s *server) ListTopics(_ context.Context, req *logstorepb.ListTopicsRequest) (*logstorepb.ListTopicsResponse, error) {
	if req.PageToken != "" && !ValidTopic(req.PageToken) {
		return nil, InvalidArg("page_token %q is not a topic name (pass the previous page's next_page_token)", req.PageToken)
	}
	if req.Leader {
		if err := s.leaderOnly(); err != nil {
			return nil, err
		}
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = ListTopicsDefault
	}
	limit = min(limit, ListTopicsMax)
	resp := &logstorepb.ListTopicsResponse{}
	s.node.View(func(st *fsm.State) {
		names, more := st.TopicPage(req.PageToken, limit)
		for _, t := range names {
			resp.Topics = append(resp.Topics, topicInfo(st, t))
		}
		if more {
			resp.NextPageToken = names[len(names)-1]
		}
		resp.TopicCount = uint64(st.TopicCount())
		if req.PageToken == "" {
			resp.Patterns = st.Patterns()
		}
	})
	s.firstOffsets(resp.Topics)
	return resp, nil
}

// topicInfo is topic as the state knows it (first offset still 0).
func topicInfo(st *fsm.State, topic string) *logstorepb.TopicInfo {
	schema, by := st.TopicSchema(topic)
	return &logstorepb.TopicInfo{Topic: topic, Schema: schema, DeclaredBy: by, NextOffset: uint64(st.NextOffset(topic))}
}

// firstOffsets fills each topic's oldest retained offset from the segment
// index, after the state was read: the segment log holds at least every
// offset the state counted, except what retention removed since.
func (s *server) firstOffsets(infos []*logstorepb.TopicInfo) {
	for _, t := range infos {
		if t.NextOffset > 0 {
			first, retained := s.log.TopicFirstOffset(t.Topic)
			t.FirstOffset = uint64(OldestOffset(first, retained, types.Offset(t.NextOffset)))
		}
	}
}

// statusTopics fills Status's bounded topic summary: the first
// StatusTopicsMax topics by name and the counts, without sorting or
// walking the whole table (ListTopics pages through all of them).
func (s *server) statusTopics(resp *logstorepb.StatusResponse) {
	var infos []*logstorepb.TopicInfo
	s.node.View(func(st *fsm.State) {
		names, more := st.TopicPage("", StatusTopicsMax)
		for _, t := range names {
			infos = append(infos, &logstorepb.TopicInfo{Topic: t, NextOffset: uint64(st.NextOffset(t))})
		}
		resp.TopicsTruncated = more
		resp.TopicCount = uint64(st.TopicCount())
		resp.TopicDeclarationCount = uint64(st.TopicDeclarationCount())
	})
	s.firstOffsets(infos)
	for _, t := range infos {
		resp.Topics = append(resp.Topics, &logstorepb.TopicStatus{Topic: t.Topic, FirstOffset: t.FirstOffset, NextOffset: t.NextOffset})
	}
}

// OldestOffset is the oldest offset of a topic this node can still read:
// first, the topic's first retained offset (TopicFirstOffset), when
// retained; next, the topic's next offset from the state read before the
// lookup, when retention removed every message of the topic (or messages
// appended since the state was read are all that is retained).
func OldestOffset(first types.Offset, retained bool, next types.Offset) types.Offset {
	if retained && first < next {
		return first
	}
	return next
}
