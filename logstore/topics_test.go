package logstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
)

func kvDecl(topic, pattern string) *logstorepb.CreateTopicRequest {
	return &logstorepb.CreateTopicRequest{Declaration: &logstorepb.TopicDeclaration{Topic: topic, Pattern: pattern, Schema: logstorepb.TopicSchema_TOPIC_SCHEMA_KV}}
}

func topicsReq(prefix string, n int) *logstorepb.AppendRequest {
	req := &logstorepb.AppendRequest{}
	for i := range n {
		req.Slices = append(req.Slices, &logstorepb.Slice{Topic: fmt.Sprintf("%s%03d", prefix, i), Messages: []*logstorepb.Message{{Value: []byte("x")}}})
	}
	return req
}

// TestTopicDeclarationsAtTheEdge: a declared kv pattern makes the server
// refuse, before the log, an Append (and the same request in an
// AppendBatch) whose message is not a mutation: SCHEMA_MISMATCH naming the
// topic and the message index, nothing written. DescribeTopic shows the
// effective schema, ListTopics pages, Status stays bounded, and the topic
// table's cap is TABLE_FULL naming the limit.
func TestTopicDeclarationsAtTheEdge(t *testing.T) {
	const maxTopics = logstore.StatusTopicsMax + 20
	c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.MaxTopics = maxTopics })
	waitClusterVersion(t, c, fsm.CurrentVersion)
	ls := rawConn(t, c.Nodes[0].APIAddr())
	ctx := ctxT(t, 60*time.Second)
	if r, err := ls.CreateTopic(ctx, kvDecl("", "shard-*")); err != nil || !r.Created {
		t.Fatalf("CreateTopic: %v %v", r, err)
	}
	bad := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
		{Topic: "orders", Messages: []*logstorepb.Message{{Value: []byte("{}")}}},
		{Topic: "shard-0", Messages: []*logstorepb.Message{{Value: shard.EncodePut([]byte("k"), []byte("v"))}, {Value: []byte("hi")}}},
	}}
	check := func(what string, err error) {
		t.Helper()
		d := apierr.Detail(err)
		if status.Code(err) != codes.InvalidArgument || d.GetCode() != logstorepb.ErrorCode_SCHEMA_MISMATCH || d.Topic != "shard-0" || d.MessageIndex != 1 || d.TopicDeclaration != "shard-*" {
			t.Fatalf("%s: %v (detail %v), want SCHEMA_MISMATCH shard-0 message 1", what, err, d)
		}
	}
	_, err := ls.Append(ctx, bad)
	check("Append", err)
	br, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{bad}})
	if err != nil || len(br.Results) != 1 || br.Results[0].Error == nil {
		t.Fatalf("batch: %v %v", br, err)
	}
	check("AppendBatch", apierr.Decode(br.Results[0].Error))
	if h := c.Nodes[0].HeadLSN(); h != 0 {
		t.Fatalf("refused appends wrote: head %d", h)
	}
	bad.Slices[1].Messages[1] = &logstorepb.Message{Value: shard.EncodeDelete([]byte("k"))}
	if _, err := ls.Append(ctx, bad); err != nil {
		t.Fatalf("valid append: %v", err)
	}

	d, err := ls.DescribeTopic(ctx, &logstorepb.DescribeTopicRequest{Topic: "shard-0", Leader: true})
	if err != nil || d.Topic.Schema != logstorepb.TopicSchema_TOPIC_SCHEMA_KV || d.Topic.DeclaredBy != "shard-*" || d.Topic.NextOffset != 2 {
		t.Fatalf("DescribeTopic shard-0: %v %v", d, err)
	}
	if d, err := ls.DescribeTopic(ctx, &logstorepb.DescribeTopicRequest{Topic: "shard-9"}); err != nil || d.Topic.NextOffset != 0 || d.Topic.DeclaredBy != "shard-*" {
		t.Fatalf("DescribeTopic of an unwritten topic a pattern declares: %v %v", d, err)
	}
	if _, err := ls.DescribeTopic(ctx, &logstorepb.DescribeTopicRequest{Topic: "never"}); status.Code(err) != codes.NotFound || apierr.CodeOf(err) != logstorepb.ErrorCode_UNKNOWN_TOPIC {
		t.Fatalf("DescribeTopic of an unknown topic: %v, want UNKNOWN_TOPIC", err)
	}

	// More topics than Status lists: Status is cut, ListTopics pages.
	if _, err := ls.Append(ctx, topicsReq("t", logstore.StatusTopicsMax)); err != nil {
		t.Fatal(err)
	}
	total := logstore.StatusTopicsMax + 2 // + orders, shard-0
	st, err := ls.Status(ctx, &logstorepb.StatusRequest{})
	if err != nil || len(st.Topics) != logstore.StatusTopicsMax || !st.TopicsTruncated || st.TopicCount != uint64(total) || st.TopicDeclarationCount != 1 {
		t.Fatalf("Status: %d topics, truncated %v, count %d, declarations %d, %v", len(st.Topics), st.TopicsTruncated, st.TopicCount, st.TopicDeclarationCount, err)
	}
	var paged []string
	token, pages := "", 0
	for {
		resp, err := ls.ListTopics(ctx, &logstorepb.ListTopicsRequest{PageToken: token, Limit: 30})
		if err != nil {
			t.Fatal(err)
		}
		if pages++; pages == 1 != (len(resp.Patterns) == 1) {
			t.Fatalf("page %d patterns %v", pages, resp.Patterns)
		}
		for _, ti := range resp.Topics {
			paged = append(paged, ti.Topic)
		}
		if token = resp.NextPageToken; token == "" {
			break
		}
	}
	if len(paged) != total || !slices.IsSorted(paged) || pages != (total+29)/30 {
		t.Fatalf("paged %d topics in %d pages (sorted %v), want %d", len(paged), pages, slices.IsSorted(paged), total)
	}
	if _, err := ls.ListTopics(ctx, &logstorepb.ListTopicsRequest{PageToken: "not a topic"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad page token: %v", err)
	}

	// The cap: 102 topics held, 20 more would pass maxTopics (120).
	head := c.Nodes[0].HeadLSN()
	_, err = ls.Append(ctx, topicsReq("u", 20))
	if dt := apierr.Detail(err); status.Code(err) != codes.ResourceExhausted || dt.GetCode() != logstorepb.ErrorCode_TABLE_FULL || dt.Limit != maxTopics {
		t.Fatalf("beyond the topic cap: %v (detail %v), want TABLE_FULL limit %d", err, dt, maxTopics)
	}
	if h := c.Nodes[0].HeadLSN(); h != head {
		t.Fatalf("refused append wrote: head %d, was %d", h, head)
	}
	if _, err := ls.Append(ctx, topicsReq("u", 18)); err != nil {
		t.Fatalf("up to the cap: %v", err)
	}

	// The declaration survives a snapshot and a restart.
	if err := c.Nodes[0].Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	c.stop(0)
	c.restart(0)
	c.waitLeader()
	ls = rawConn(t, c.Nodes[0].APIAddr())
	bad.Slices[1].Messages[1] = &logstorepb.Message{Value: []byte("hi")}
	_, err = ls.Append(ctx, bad)
	check("Append after a restart from a snapshot", err)
}

// TestTopicsGatedWithAnOldVoter: with a voter advertising version 2,
// CreateTopic is FEATURE_NOT_ENABLED and the topic cap is not applied (a
// version-2 replica would not apply it: the cluster applies as before);
// once the voter is upgraded both work.
func TestTopicsGatedWithAnOldVoter(t *testing.T) {
	c := startCluster(t, 3, func(cfg *logstore.Config) {
		cfg.MaxTopics = 3
		if cfg.ID == "n2" {
			cfg.AdvertisedVersion = 2
		}
	})
	c.waitLeader()
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 60*time.Second)
	testwait.For(t, 30*time.Second, "cluster version 2", func() bool { return c.waitLeader().ClusterVersion() == 2 })
	if _, err := cl.CreateTopic(ctx, kvDecl("", "shard-*").Declaration); apierr.CodeOf(err) != logstorepb.ErrorCode_FEATURE_NOT_ENABLED {
		t.Fatalf("CreateTopic at version 2: %v, want FEATURE_NOT_ENABLED", err)
	}
	if _, err := cl.Append(ctx, topicsReq("t", 5)); err != nil {
		t.Fatalf("5 topics at version 2 (cap 3 not applied): %v", err)
	}
	c.stop(2)
	c.cfgs[2].AdvertisedVersion = 0
	c.restart(2)
	waitClusterVersion(t, c, fsm.CurrentVersion)
	if _, err := cl.CreateTopic(ctx, kvDecl("", "shard-*").Declaration); err != nil {
		t.Fatalf("CreateTopic after the upgrade: %v", err)
	}
	if _, err := cl.Append(ctx, topicsReq("u", 1)); apierr.CodeOf(err) != logstorepb.ErrorCode_TABLE_FULL {
		t.Fatalf("a new topic beyond the cap after the upgrade: %v, want TABLE_FULL", err)
	}
	if _, err := cl.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "t000", Messages: []*logstorepb.Message{{Value: []byte("x")}}}}}); err != nil {
		t.Fatalf("an existing topic at the cap: %v", err)
	}
}
