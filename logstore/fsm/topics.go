package fsm

import (
	"container/heap"
	"fmt"
	"strings"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/schema"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// TopicsVersion is the cluster version that introduced topic declarations
// (CreateTopic), the schema check of Appends against them, and the cap on
// the topic table (ApplyLimits.max_topics). Below it apply does what it did
// before: no declaration exists, and the topic table has no cap.
const TopicsVersion uint32 = 3

// topicDecls is the declaration table: exact names and patterns (keyed by
// their prefix, the pattern without its '*'). Invariant: every row passed
// ValidateDeclaration and has a schema with a validator (never UNSPECIFIED).
type topicDecls struct {
	exact    map[string]*logstorepb.TopicDeclaration
	prefixes map[string]*logstorepb.TopicDeclaration
}

func (d *topicDecls) len() int { return len(d.exact) + len(d.prefixes) }

// tableOf is the map a declaration belongs in and its key there.
func (d *topicDecls) tableOf(row *logstorepb.TopicDeclaration) (*map[string]*logstorepb.TopicDeclaration, string) {
	if row.Pattern != "" {
		return &d.prefixes, strings.TrimSuffix(row.Pattern, "*")
	}
	return &d.exact, row.Topic
}

// toProto lists every declaration sorted by key (the topic name or the
// pattern: no name holds a '*', so the keys never collide), as copies.
func (d *topicDecls) toProto() []*logstorepb.TopicDeclaration {
	byKey := make(map[string]*logstorepb.TopicDeclaration, d.len())
	for t, row := range d.exact {
		byKey[t] = row
	}
	for _, row := range d.prefixes {
		byKey[row.Pattern] = row
	}
	out := make([]*logstorepb.TopicDeclaration, 0, len(byKey))
	for _, k := range sortedKeys(byKey) {
		row := byKey[k]
		out = append(out, &logstorepb.TopicDeclaration{Topic: row.Topic, Pattern: row.Pattern, Schema: row.Schema})
	}
	return out
}

// restore rebuilds the table from a snapshot's rows (taking ownership).
func (d *topicDecls) restore(rows []*logstorepb.TopicDeclaration) error {
	for _, row := range rows {
		requireValidator(row)
		if err := ValidateDeclaration(row); err != nil || row.Schema == logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED {
			return fmt.Errorf("%w: topic declaration %v: %v", ErrCorruptState, row, err)
		}
		table, key := d.tableOf(row)
		if *table == nil {
			*table = map[string]*logstorepb.TopicDeclaration{}
		}
		if (*table)[key] != nil {
			return fmt.Errorf("%w: topic declaration %v twice", ErrCorruptState, row)
		}
		(*table)[key] = row
	}
	return nil
}

// ValidateDeclaration checks a declaration as CreateTopic takes it (the
// server at the edge, apply again): exactly one of a valid topic name and a
// pattern (a valid name prefix, possibly empty, then one '*' at the end),
// and a schema this binary has a validator for (package logstore/schema).
// Errors are INVALID_ARGUMENT / INVALID_TOPIC.
func ValidateDeclaration(d *logstorepb.TopicDeclaration) error {
	switch {
	case d == nil:
		return apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "topic declaration is required")
	case (d.Topic == "") == (d.Pattern == ""):
		return apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "topic declaration needs exactly one of topic and pattern (got topic %q, pattern %q)", d.Topic, d.Pattern)
	case d.Topic != "" && !types.ValidTopic(d.Topic):
		return apierr.New(logstorepb.ErrorCode_INVALID_TOPIC,
			fmt.Sprintf("invalid topic %q: want 1..%d characters of [a-zA-Z0-9._-]", d.Topic, types.MaxTopicLen),
			func(e *logstorepb.ErrorDetail) { e.Topic = d.Topic })
	case d.Pattern != "" && !validPattern(d.Pattern):
		return apierr.New(logstorepb.ErrorCode_INVALID_TOPIC,
			fmt.Sprintf("invalid topic pattern %q: want a name prefix of [a-zA-Z0-9._-] (at most %d characters) then one '*' at the end, e.g. \"shard-*\"", d.Pattern, types.MaxTopicLen-1),
			func(e *logstorepb.ErrorDetail) { e.Topic = d.Pattern })
	}
	if _, err := schema.Lookup(d.Schema); err != nil {
		return apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "%v", err)
	}
	return nil
}

// requireValidator panics if d names a schema the TopicSchema enum defines
// but this binary registered no validator for (schema.Require): apply of a
// committed declaration, or of a snapshot holding one, cannot decide what
// the other replicas decide without it. A nil d or an undefined number is
// left to ValidateDeclaration, which refuses it on every replica.
func requireValidator(d *logstorepb.TopicDeclaration) {
	if d != nil {
		schema.Require(d.Schema)
	}
}

func validPattern(p string) bool {
	prefix, ok := strings.CutSuffix(p, "*")
	return ok && (prefix == "" || len(prefix) < types.MaxTopicLen && types.ValidTopic(prefix))
}

// SchemaName is the CLI's word for a schema ("bytes", "kv"): schema.Name.
func SchemaName(s logstorepb.TopicSchema) string { return schema.Name(s) }

// TopicSchema is topic's effective schema and the declaration it comes
// from (the topic's name, a pattern, or "" for the default BYTES):
// the exact declaration beats every pattern, and the longest matching
// pattern wins. It costs at most len(topic)+2 map lookups.
func (s *State) TopicSchema(topic string) (logstorepb.TopicSchema, string) {
	if d := s.decls.exact[topic]; d != nil {
		return d.Schema, d.Topic
	}
	if len(s.decls.prefixes) > 0 {
		for l := len(topic); l >= 0; l-- {
			if d := s.decls.prefixes[topic[:l]]; d != nil {
				return d.Schema, d.Pattern
			}
		}
	}
	return logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES, ""
}

// Declared reports whether topic is declared by its own name.
func (s *State) Declared(topic string) bool { return s.decls.exact[topic] != nil }

// TopicDeclarationCount is the number of declarations (names and patterns).
func (s *State) TopicDeclarationCount() int { return s.decls.len() }

// Patterns returns the pattern declarations sorted by pattern (copies).
func (s *State) Patterns() []*logstorepb.TopicDeclaration {
	out := make([]*logstorepb.TopicDeclaration, 0, len(s.decls.prefixes))
	for _, p := range sortedKeys(s.decls.prefixes) {
		d := s.decls.prefixes[p]
		out = append(out, &logstorepb.TopicDeclaration{Pattern: d.Pattern, Schema: d.Schema})
	}
	return out
}

// TopicCount is the number of topics: written, or declared by name.
func (s *State) TopicCount() int {
	n := len(s.topics)
	for t := range s.decls.exact {
		if _, ok := s.topics[t]; !ok {
			n++
		}
	}
	return n
}

// TopicPage returns, sorted, the first limit topic names (written or
// declared by name) above after, and whether more follow. It does not sort
// the whole table: one pass with a heap of limit names, O(n log limit).
func (s *State) TopicPage(after string, limit int) (names []string, more bool) {
	if limit <= 0 {
		return nil, s.TopicCount() > 0
	}
	h := &maxHeap{}
	seen := 0
	offer := func(t string) {
		if t <= after {
			return
		}
		seen++
		if h.Len() < limit {
			heap.Push(h, t)
		} else if t < (*h)[0] {
			(*h)[0] = t
			heap.Fix(h, 0)
		}
	}
	for t := range s.topics { // order-free: the heap orders
		offer(t)
	}
	for t := range s.decls.exact {
		if _, ok := s.topics[t]; !ok {
			offer(t)
		}
	}
	names = make([]string, h.Len())
	for i := len(names) - 1; i >= 0; i-- {
		names[i] = heap.Pop(h).(string)
	}
	return names, seen > limit
}

// maxHeap is a max-heap of names (container/heap).
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// CheckSlice checks every message of a slice of topic against schema (as
// TopicSchema returned it, with declaredBy): nil for BYTES; otherwise each
// value must pass the schema's registered validator (package
// logstore/schema; kv's is the reference shard's mutation.Validate). The
// error is SCHEMA_MISMATCH naming the topic, the message index and the
// declaration. A schema with no validator in this binary panics
// (schema.Require): the declaration committed, so the other replicas check
// it.
func CheckSlice(topic string, msgs []*logstorepb.Message, s logstorepb.TopicSchema, declaredBy string) error {
	if s == logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES || s == logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED {
		return nil
	}
	v, ok := schema.Require(s)
	if !ok { // a declaration passed ValidateDeclaration: a bug
		panic(fmt.Sprintf("topic %q declared by %q has schema %d, which this build does not define", topic, declaredBy, int32(s)))
	}
	for i, m := range msgs {
		if err := v.Validate(m.GetValue()); err != nil {
			return apierr.New(logstorepb.ErrorCode_SCHEMA_MISMATCH,
				fmt.Sprintf("topic %q message %d does not match schema %s (declared by %q): %v; nothing was written", topic, i, schema.Name(s), declaredBy, err),
				func(d *logstorepb.ErrorDetail) {
					d.Topic, d.MessageIndex, d.TopicDeclaration = topic, uint64(i), declaredBy
				})
		}
	}
	return nil
}

// checkTopics is apply's check of an Append against the topic table
// before anything changes: every slice matches its topic's schema, and the
// topic table has room for the topics it adds. Both only from
// TopicsVersion on (below it no declaration exists and there is no cap).
func (m *Machine) checkTopics(req *logstorepb.AppendRequest) error {
	st := m.st
	if st.ClusterVersion() < TopicsVersion {
		return nil
	}
	if st.decls.len() > 0 {
		for _, sl := range req.Slices {
			schema, by := st.TopicSchema(sl.Topic)
			if err := CheckSlice(sl.Topic, sl.Messages, schema, by); err != nil {
				return err
			}
		}
	}
	if m.lim.MaxTopics == 0 {
		return nil
	}
	added := 0 // topics are distinct per request (checked at the edge); a duplicate only over-counts, the same on every replica
	for _, sl := range req.Slices {
		if _, ok := st.topics[sl.Topic]; !ok {
			added++
		}
	}
	// Only new topics are refused: a table above the cap (written before
	// version 3, or under a leader with a larger cap) keeps its topics.
	if added > 0 && full(len(st.topics), added, m.lim.MaxTopics) {
		return tableFull("topic", len(st.topics), m.lim.MaxTopics)
	}
	return nil
}

// applyCreateTopic adds or replaces a declaration; a new one beyond the
// declaration cap is refused (TABLE_FULL), an invalid one too (it passed
// the edge, so only a buggy leader sends it), changing nothing.
func (m *Machine) applyCreateTopic(r *logstorepb.CreateTopicRequest) Result {
	st := m.st
	d := r.GetDeclaration()
	requireValidator(d)
	if err := ValidateDeclaration(d); err != nil {
		return Result{Err: err}
	}
	row := &logstorepb.TopicDeclaration{Topic: d.Topic, Pattern: d.Pattern, Schema: d.Schema}
	if row.Schema == logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED {
		row.Schema = logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES
	}
	table, key := st.decls.tableOf(row)
	old := (*table)[key]
	if old == nil && full(st.decls.len(), 1, m.lim.MaxTopicDeclarations) {
		return Result{Err: tableFull("topic declaration", st.decls.len(), m.lim.MaxTopicDeclarations)}
	}
	if *table == nil {
		*table = map[string]*logstorepb.TopicDeclaration{}
	}
	(*table)[key] = row
	if old == nil {
		return Result{Resp: &logstorepb.CreateTopicResponse{Created: true}}
	}
	return Result{Resp: &logstorepb.CreateTopicResponse{PreviousSchema: old.Schema}}
}
