package logstore_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestTopicOldestOffsetAfterRetention: once retention removed the oldest
// segments, Status names each topic's oldest retained offset as
// first_offset, and a ReadTopic below it is OUT_OF_RANGE /
// BELOW_RETENTION with that offset as oldest_offset, also for a topic
// none of whose messages is retained any more (first_offset = next_offset).
func TestTopicOldestOffsetAfterRetention(t *testing.T) {
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.SegmentBytes = 4 << 10
		cfg.RetentionBytes = 1 // everything below the newest snapshot may go
	})
	n := c.Nodes[0]
	cl := rawConn(t, n.APIAddr())
	ctx := ctxT(t, 60*time.Second)
	const bTxns, total = 20, 200 // b only in the first 20 txns, a in every one
	for i := range total {
		topics := []string{"a"}
		if i < bTxns {
			topics = append(topics, "b")
		}
		if _, err := cl.Append(ctx, txnReq(fmt.Sprintf("%04d", i)+strings.Repeat("r", 100), topics...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.RunRetention(); err != nil {
		t.Fatal(err)
	}
	first := uint64(n.SegmentLog().FirstLSN())
	if first <= bTxns+1 {
		t.Fatalf("retention kept lsn %d: want every txn of b gone", first)
	}
	wantA := first - 1 // a's offset = lsn - 1

	st, err := cl.Status(ctx, &logstorepb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*logstorepb.TopicStatus{}
	for _, ts := range st.Topics {
		got[ts.Topic] = ts
	}
	if a := got["a"]; a.GetFirstOffset() != wantA || a.GetNextOffset() != total {
		t.Fatalf("status of a: %v, want first %d next %d", a, wantA, total)
	}
	if b := got["b"]; b.GetFirstOffset() != bTxns || b.GetNextOffset() != bTxns {
		t.Fatalf("status of b: %v, want first = next = %d", b, bTxns)
	}

	readTopic := func(topic string, from uint64) ([]*logstorepb.TopicMessage, error) {
		s, err := cl.ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: topic, FromOffset: from})
		if err != nil {
			return nil, err
		}
		var out []*logstorepb.TopicMessage
		for {
			r, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, err
			}
			out = append(out, r.Messages...)
		}
	}
	for _, tc := range []struct {
		topic  string
		from   uint64
		oldest uint64
	}{{"a", 0, wantA}, {"a", wantA - 1, wantA}, {"b", 0, bTxns}, {"b", bTxns - 1, bTxns}} {
		_, err := readTopic(tc.topic, tc.from)
		d := apierr.Detail(err)
		if status.Code(err) != codes.OutOfRange || d.GetCode() != logstorepb.ErrorCode_BELOW_RETENTION ||
			d.OldestOffset != tc.oldest || d.OldestLsn != first || d.Topic != tc.topic {
			t.Fatalf("ReadTopic %s from %d: %v (detail %v), want BELOW_RETENTION oldest offset %d lsn %d", tc.topic, tc.from, err, d, tc.oldest, first)
		}
	}
	// From the oldest offsets on, the reads succeed.
	msgs, err := readTopic("a", wantA)
	if err != nil || len(msgs) != int(total-wantA) || msgs[0].Offset != wantA {
		t.Fatalf("ReadTopic a from %d: %d messages, err %v", wantA, len(msgs), err)
	}
	if msgs, err := readTopic("b", bTxns); err != nil || len(msgs) != 0 {
		t.Fatalf("ReadTopic b from its next offset: %v, %v", msgs, err)
	}
}
