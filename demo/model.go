package demo

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/shard"
)

// Model is what the log says: built by feeding it every committed
// transaction in LSN order, from LSN 1.
type Model struct {
	lastLSN uint64
	// state is each shard topic's expected key-value state.
	state map[string]map[string][]byte
	// messages lists, per topic, the LSN of each offset (index = offset).
	messages map[string][]uint64
	// ids holds every unique id (a unique key, an event's txn) seen, to
	// count a producer retry that wrote twice.
	ids          map[string]bool
	logDuplicate int
	// txnIDs maps an LSN to its transaction's id (its orders event key).
	txnIDs map[uint64]string
}

// NewModel returns an empty model.
func NewModel() *Model {
	return &Model{
		state:    map[string]map[string][]byte{},
		messages: map[string][]uint64{},
		ids:      map[string]bool{},
		txnIDs:   map[uint64]string{},
	}
}

// Apply feeds the next committed transaction. It returns an error if the
// log itself is wrong: an LSN gap, a topic offset that does not follow on, or
// a shard message that is not a valid mutation.
func (m *Model) Apply(t *logstorepb.Transaction) error {
	if t.Lsn != m.lastLSN+1 {
		return fmt.Errorf("log: lsn %d follows %d", t.Lsn, m.lastLSN)
	}
	m.lastLSN = t.Lsn
	for _, s := range t.Slices {
		offs := m.messages[s.Topic]
		if s.FirstOffset != uint64(len(offs)) {
			return fmt.Errorf("log: lsn %d topic %s first offset %d, want %d", t.Lsn, s.Topic, s.FirstOffset, len(offs))
		}
		for _, msg := range s.Messages {
			offs = append(offs, t.Lsn)
			if err := m.applyMessage(t.Lsn, s.Topic, msg); err != nil {
				return err
			}
		}
		m.messages[s.Topic] = offs
	}
	return nil
}

func (m *Model) applyMessage(lsn uint64, topic string, msg *logstorepb.Message) error {
	switch {
	case strings.HasPrefix(topic, "shard-"):
		kv := m.state[topic]
		if kv == nil {
			kv = map[string][]byte{}
			m.state[topic] = kv
		}
		one := []*logstorepb.TxnSlice{{Topic: topic, Messages: []*logstorepb.Message{msg}}}
		if err := shard.ModelApply(kv, []string{topic}, one); err != nil {
			return fmt.Errorf("log: lsn %d: %w", lsn, err)
		}
		if mut, _ := shard.DecodeMutation(msg.Value); mut.Op == shardpb.Mutation_PUT && bytes.HasPrefix(mut.Key, []byte("u")) {
			m.seen(topic + "/" + string(mut.Key))
		}
	case topic == OrdersTopic || topic == InventoryTopic:
		m.seen(topic + "/" + string(msg.Key))
		if topic == OrdersTopic {
			m.txnIDs[lsn] = string(msg.Key)
		}
	}
	return nil
}

func (m *Model) seen(id string) {
	if m.ids[id] {
		m.logDuplicate++
	}
	m.ids[id] = true
}

// AckedNotInLog counts acknowledged transactions (LSN -> transaction id)
// that the log does not hold at their LSN: an acknowledgement that lied.
func (m *Model) AckedNotInLog(acked map[uint64]string) int {
	n := 0
	for lsn, id := range acked {
		if m.txnIDs[lsn] != id {
			n++
		}
	}
	return n
}

// LastLSN is the LSN of the last transaction fed.
func (m *Model) LastLSN() uint64 { return m.lastLSN }

// LogDuplicates counts ids written twice to the log (each a producer retry
// that the idempotent producer failed to catch).
func (m *Model) LogDuplicates() int { return m.logDuplicate }

// State is the expected state of a shard topic (nil if it has none).
func (m *Model) State(topic string) map[string][]byte { return m.state[topic] }

// Messages counts the topic's messages with an LSN in (afterLSN, throughLSN].
func (m *Model) Messages(topic string, afterLSN, throughLSN uint64) int {
	n := 0
	for _, lsn := range m.messages[topic] {
		if lsn > afterLSN && lsn <= throughLSN {
			n++
		}
	}
	return n
}

// StateDiff is how a shard's real state differs from the model's.
type StateDiff struct {
	Keys       int // keys the model expects
	Missing    int // expected keys the shard lacks
	Wrong      int // keys with another value than the model's
	Unexpected int // keys the shard has and the model does not
}

// OK reports whether the states are equal.
func (d StateDiff) OK() bool { return d.Missing == 0 && d.Wrong == 0 && d.Unexpected == 0 }

// CompareShard compares a shard's real state with the model's for topic.
func (m *Model) CompareShard(topic string, real map[string][]byte) StateDiff {
	want := m.state[topic]
	d := StateDiff{Keys: len(want)}
	for k, v := range want {
		got, ok := real[k]
		switch {
		case !ok:
			d.Missing++
		case !bytes.Equal(got, v):
			d.Wrong++
		}
	}
	for k := range real {
		if _, ok := want[k]; !ok {
			d.Unexpected++
		}
	}
	return d
}
