package client

import (
	"slices"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Wire types the SDK hands out and takes as they are.
type (
	// Message is one message of a slice: a value, an optional key and
	// headers (at most the server's MaxMessageBytes together).
	Message = logstorepb.Message
	// Header is one message header.
	Header = logstorepb.Header
	// Transaction is a committed transaction as Reader returns it.
	Transaction = logstorepb.Transaction
	// TopicMessage is one message of a topic as TopicReader returns it.
	TopicMessage = logstorepb.TopicMessage
)

// Txn builds one transaction: messages for 1..N topics, conditions, and
// consumer-group offset commits, committed all together or not at all.
// Methods chain and return t; the zero Txn (or NewTxn()) is empty. A Txn
// may be appended more than once (each Append is a new transaction). The
// byte slices given to it are not copied: do not change them until the
// Append that carries them has returned a result (or, in doubt, Resolve).
type Txn struct {
	slices  []*logstorepb.Slice
	conds   []*logstorepb.Condition
	commits []*logstorepb.OffsetCommit
}

// NewTxn returns an empty transaction.
func NewTxn() *Txn { return &Txn{} }

// slice returns topic's slice, adding it at the end the first time: a
// topic's messages form one slice, in the order they were added.
func (t *Txn) slice(topic string) *logstorepb.Slice {
	for _, s := range t.slices {
		if s.Topic == topic {
			return s
		}
	}
	s := &logstorepb.Slice{Topic: topic}
	t.slices = append(t.slices, s)
	return s
}

// Add appends messages with these values (no key, no headers) to topic.
func (t *Txn) Add(topic string, values ...[]byte) *Txn {
	s := t.slice(topic)
	for _, v := range values {
		s.Messages = append(s.Messages, &logstorepb.Message{Value: v})
	}
	return t
}

// AddKeyed appends one message with a key and headers to topic.
func (t *Txn) AddKeyed(topic string, key, value []byte, headers ...*Header) *Txn {
	s := t.slice(topic)
	s.Messages = append(s.Messages, &logstorepb.Message{Key: key, Value: value, Headers: headers})
	return t
}

// AddMessages appends msgs to topic.
func (t *Txn) AddMessages(topic string, msgs ...*Message) *Txn {
	s := t.slice(topic)
	s.Messages = append(s.Messages, msgs...)
	return t
}

// Expect makes the transaction conditional: it commits only if topic's next
// offset is nextOffset when it is applied (optimistic concurrency, like an
// event store's expected version); otherwise it fails alone with a
// *ConditionError naming the actual next offset. Expecting the same topic
// again replaces the earlier expectation.
func (t *Txn) Expect(topic string, nextOffset types.Offset) *Txn {
	return t.condition("", topic, nextOffset)
}

// ExpectCommitted makes the transaction conditional on group's committed
// offset of topic being offset (0 when the group never committed one). A
// read-process-write consumer states the offset it resumed from, so that
// a second instance of it, or one that was presumed dead, cannot commit the
// same input twice.
func (t *Txn) ExpectCommitted(group, topic string, offset types.Offset) *Txn {
	return t.condition(group, topic, offset)
}

func (t *Txn) condition(group, topic string, offset types.Offset) *Txn {
	keyed(&t.conds, group, topic, func() *logstorepb.Condition {
		return &logstorepb.Condition{Group: group, Topic: topic}
	}).ExpectedNextOffset = uint64(offset)
	return t
}

// keyed returns the element of *list for group and topic, appending the
// one fresh makes when there is none: a transaction holds at most one
// condition, and one offset commit, per group and topic.
func keyed[E interface {
	GetGroup() string
	GetTopic() string
}](list *[]E, group, topic string, fresh func() E) E {
	for _, e := range *list {
		if e.GetGroup() == group && e.GetTopic() == topic {
			return e
		}
	}
	e := fresh()
	*list = append(*list, e)
	return e
}

// CommitOffset records group's position in topic (the next offset it will
// read) in the same transaction as its messages: a consumer's output and
// its progress commit together (read-process-write exactly once). A
// transaction may carry only offset commits. Committing the same group and
// topic again replaces the earlier offset.
func (t *Txn) CommitOffset(group, topic string, offset types.Offset) *Txn {
	keyed(&t.commits, group, topic, func() *logstorepb.OffsetCommit {
		return &logstorepb.OffsetCommit{Group: group, Topic: topic}
	}).Offset = uint64(offset)
	return t
}

// Request returns the transaction as a new AppendRequest (without producer
// id and sequence), e.g. for Client.Append. Later changes to t do not
// change it; the messages are shared.
func (t *Txn) Request() *logstorepb.AppendRequest {
	req := &logstorepb.AppendRequest{}
	for _, s := range t.slices {
		req.Slices = append(req.Slices, &logstorepb.Slice{Topic: s.Topic, Messages: slices.Clone(s.Messages)})
	}
	for _, c := range t.conds {
		req.Conditions = append(req.Conditions, &logstorepb.Condition{Group: c.Group, Topic: c.Topic, ExpectedNextOffset: c.ExpectedNextOffset})
	}
	for _, oc := range t.commits {
		req.OffsetCommits = append(req.OffsetCommits, &logstorepb.OffsetCommit{Group: oc.Group, Topic: oc.Topic, Offset: oc.Offset})
	}
	return req
}

// Result is the outcome of a committed transaction.
type Result struct {
	// LSN is the transaction's log sequence number.
	LSN types.LSN
	// Offsets maps each topic the transaction wrote to the offset of its
	// first message there (the slice holds offsets Offsets[t] ... + n-1).
	Offsets map[string]types.Offset
	// Sequence is the producer sequence that carried the transaction.
	Sequence uint64
	// Duplicate is true when a retry found the transaction already
	// committed: LSN and Offsets are then those of the first commit.
	Duplicate bool
}

func newResult(resp *logstorepb.AppendResponse, seq uint64) *Result {
	r := &Result{LSN: types.LSN(resp.Lsn), Offsets: make(map[string]types.Offset, len(resp.Slices)), Sequence: seq, Duplicate: resp.Duplicate}
	for _, s := range resp.Slices {
		r.Offsets[s.Topic] = types.Offset(s.FirstOffset)
	}
	return r
}
