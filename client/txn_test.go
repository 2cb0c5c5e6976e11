package client

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestTxnKeyedReplace: a transaction holds one condition and one offset
// commit per group and topic; stating one again replaces it in its place,
// and a different group or topic is a new one.
func TestTxnKeyedReplace(t *testing.T) {
	req := NewTxn().
		Expect("a", 1).
		ExpectCommitted("g", "a", 2).
		CommitOffset("g", "a", 3).
		CommitOffset("h", "a", 4).
		Expect("a", 5).
		ExpectCommitted("g", "b", 6).
		ExpectCommitted("g", "a", 7).
		CommitOffset("g", "a", 8).
		Request()
	want := &logstorepb.AppendRequest{
		Conditions: []*logstorepb.Condition{
			{Topic: "a", ExpectedNextOffset: 5},
			{Group: "g", Topic: "a", ExpectedNextOffset: 7},
			{Group: "g", Topic: "b", ExpectedNextOffset: 6},
		},
		OffsetCommits: []*logstorepb.OffsetCommit{
			{Group: "g", Topic: "a", Offset: 8},
			{Group: "h", Topic: "a", Offset: 4},
		},
	}
	if !proto.Equal(req, want) {
		t.Fatalf("request:\n%v\nwant:\n%v", req, want)
	}
}
