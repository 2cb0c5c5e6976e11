package api

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestSentFindsOnlyTheBytesItWasGiven: Take answers the very slice Put
// was given (the leader's FSM), never equal bytes elsewhere (a follower's
// copy, a replay), once; Drop forgets.
func TestSentFindsOnlyTheBytesItWasGiven(t *testing.T) {
	e := &logstorepb.Entry{TimestampUnixNano: 7, Commands: []*logstorepb.Command{{Kind: &logstorepb.Command_NextEpoch{NextEpoch: &logstorepb.NextEpochRequest{}}}}}
	data, err := proto.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSent()
	s.Put(data, e)
	if got := s.Take(append([]byte(nil), data...)); got != nil {
		t.Fatal("a copy of the bytes found the entry")
	}
	if got := s.Take(data[:len(data)-1]); got != nil {
		t.Fatal("a prefix of the bytes found the entry")
	}
	if got := s.Take(data); got != e {
		t.Fatalf("Take = %v, want the entry put", got)
	}
	if got := s.Take(data); got != nil {
		t.Fatal("taken twice")
	}
	s.Put(data, e)
	s.Drop(data)
	if got := s.Take(data); got != nil || len(s.m) != 0 {
		t.Fatal("dropped entry still held")
	}
	var none *Sent
	if none.Take(data) != nil {
		t.Fatal("nil Sent found an entry")
	}
}
